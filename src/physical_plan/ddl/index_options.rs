//! The index types `CREATE INDEX` builds and the `WITH (key = value)`
//! options each takes, turned into Lance's index parameters.
//!
//! | type | options |
//! |---|---|
//! | `BTREE`, `BITMAP`, `LABEL_LIST`, `ZONEMAP`, `BLOOMFILTER`, `NGRAM` | none |
//! | `INVERTED` | `base_tokenizer`, `language`, `with_position`, `lower_case`, `stem`, `remove_stop_words`, `ascii_folding`, `max_token_length` |
//! | `IVF_FLAT`, `IVF_SQ`, `IVF_PQ`, `IVF_HNSW_SQ`, `IVF_HNSW_PQ` | `metric` (`l2`, `cosine`, `dot`), `num_partitions`, `max_iterations`, `sample_rate`; PQ: `num_sub_vectors`, `num_bits`; HNSW: `m`, `ef_construction` |
//!
//! Every type also takes `replace` (`true`: an index of the same name is
//! rebuilt instead of being an error).

use lance::index::vector::VectorIndexParams;
use lance_index::scalar::{BuiltinIndexType, InvertedIndexParams, ScalarIndexParams};
use lance_index::vector::hnsw::builder::HnswBuildParams;
use lance_index::vector::ivf::IvfBuildParams;
use lance_index::vector::pq::PQBuildParams;
use lance_index::vector::sq::builder::SQBuildParams;
use lance_index::{IndexParams, IndexType};
use lance_linalg::distance::DistanceType;

use crate::config::{parse, parse_bool};
use crate::error::Error;

/// An index type `CREATE INDEX ... USING <type>` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IndexMethod {
    /// `BTREE` (scalar).
    BTree,
    /// `BITMAP` (scalar, few distinct values).
    Bitmap,
    /// `LABEL_LIST` (list columns: `array_has_any` / `array_has_all`).
    LabelList,
    /// `ZONEMAP` (scalar, min/max per zone).
    ZoneMap,
    /// `BLOOMFILTER` (scalar, equality).
    BloomFilter,
    /// `NGRAM` (strings: `LIKE '%x%'`, `contains`).
    NGram,
    /// `INVERTED` (full-text search).
    Inverted,
    /// `IVF_FLAT` (vectors).
    IvfFlat,
    /// `IVF_SQ` (vectors, scalar-quantised).
    IvfSq,
    /// `IVF_PQ` (vectors, product-quantised).
    IvfPq,
    /// `IVF_HNSW_SQ` (vectors, graph + scalar quantisation).
    IvfHnswSq,
    /// `IVF_HNSW_PQ` (vectors, graph + product quantisation).
    IvfHnswPq,
}

impl IndexMethod {
    /// Every type, in the order the docs list them.
    pub const ALL: [IndexMethod; 12] = [
        Self::BTree,
        Self::Bitmap,
        Self::LabelList,
        Self::ZoneMap,
        Self::BloomFilter,
        Self::NGram,
        Self::Inverted,
        Self::IvfFlat,
        Self::IvfSq,
        Self::IvfPq,
        Self::IvfHnswSq,
        Self::IvfHnswPq,
    ];

    /// The type's SQL name.
    pub fn name(self) -> &'static str {
        match self {
            Self::BTree => "BTREE",
            Self::Bitmap => "BITMAP",
            Self::LabelList => "LABEL_LIST",
            Self::ZoneMap => "ZONEMAP",
            Self::BloomFilter => "BLOOMFILTER",
            Self::NGram => "NGRAM",
            Self::Inverted => "INVERTED",
            Self::IvfFlat => "IVF_FLAT",
            Self::IvfSq => "IVF_SQ",
            Self::IvfPq => "IVF_PQ",
            Self::IvfHnswSq => "IVF_HNSW_SQ",
            Self::IvfHnswPq => "IVF_HNSW_PQ",
        }
    }

    /// The type called `name` (any case; `BLOOM` is `BLOOMFILTER`), or an
    /// error listing the types.
    pub fn parse(name: &str) -> Result<Self, Error> {
        let name = name.trim();
        if name.eq_ignore_ascii_case("bloom") {
            return Ok(Self::BloomFilter);
        }
        Self::ALL
            .into_iter()
            .find(|m| m.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "index type '{name}' is not one Lance builds; use one of {}",
                    Self::ALL.map(Self::name).join(", ")
                ))
            })
    }

    /// Whether it indexes vectors.
    pub fn is_vector(self) -> bool {
        matches!(
            self,
            Self::IvfFlat | Self::IvfSq | Self::IvfPq | Self::IvfHnswSq | Self::IvfHnswPq
        )
    }

    /// Lance's type.
    pub(crate) fn lance_type(self) -> IndexType {
        match self {
            Self::BTree => IndexType::BTree,
            Self::Bitmap => IndexType::Bitmap,
            Self::LabelList => IndexType::LabelList,
            Self::ZoneMap => IndexType::ZoneMap,
            Self::BloomFilter => IndexType::BloomFilter,
            Self::NGram => IndexType::NGram,
            Self::Inverted => IndexType::Inverted,
            Self::IvfFlat => IndexType::IvfFlat,
            Self::IvfSq => IndexType::IvfSq,
            Self::IvfPq => IndexType::IvfPq,
            Self::IvfHnswSq => IndexType::IvfHnswSq,
            Self::IvfHnswPq => IndexType::IvfHnswPq,
        }
    }

    /// The option keys the type takes (besides `replace`).
    fn keys(self) -> &'static [&'static str] {
        const VECTOR: &[&str] = &["metric", "num_partitions", "max_iterations", "sample_rate"];
        const PQ: &[&str] = &[
            "metric",
            "num_partitions",
            "max_iterations",
            "sample_rate",
            "num_sub_vectors",
            "num_bits",
        ];
        const HNSW_SQ: &[&str] = &[
            "metric",
            "num_partitions",
            "max_iterations",
            "sample_rate",
            "m",
            "ef_construction",
        ];
        const HNSW_PQ: &[&str] = &[
            "metric",
            "num_partitions",
            "max_iterations",
            "sample_rate",
            "num_sub_vectors",
            "num_bits",
            "m",
            "ef_construction",
        ];
        match self {
            Self::Inverted => &[
                "base_tokenizer",
                "language",
                "with_position",
                "lower_case",
                "stem",
                "remove_stop_words",
                "ascii_folding",
                "max_token_length",
            ],
            Self::IvfFlat | Self::IvfSq => VECTOR,
            Self::IvfPq => PQ,
            Self::IvfHnswSq => HNSW_SQ,
            Self::IvfHnswPq => HNSW_PQ,
            _ => &[],
        }
    }

    /// Lance's parameters for this type with `options` (`key`, `value`
    /// pairs; `replace` is not one of them), for a table of at most `rows`
    /// rows. An error names the option. Numbers Lance sizes memory by
    /// before it looks at the rows — HNSW's `m` and `ef_construction`, the
    /// IVF `sample_rate` — are bounded by `rows`: a graph or a sample can
    /// hold no more rows than the table, so the index is the same.
    pub(crate) fn params(
        self,
        options: &[(String, String)],
        rows: usize,
    ) -> Result<Box<dyn IndexParams>, Error> {
        for (key, value) in options {
            if !self.keys().contains(&key.as_str()) {
                let hint = match self.keys() {
                    [] => format!("; {} indexes take only 'replace'", self.name()),
                    keys => format!(
                        "; {} indexes take {} and 'replace'",
                        self.name(),
                        keys.iter()
                            .map(|k| format!("'{k}'"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                return Err(Error::UnknownOption {
                    key: format!("{key}={value}"),
                    hint,
                });
            }
        }
        let get = |key: &str| {
            options
                .iter()
                .rev()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        let scalar = |builtin| Ok(Box::new(ScalarIndexParams::for_builtin(builtin)) as _);
        match self {
            Self::BTree => scalar(BuiltinIndexType::BTree),
            Self::Bitmap => scalar(BuiltinIndexType::Bitmap),
            Self::LabelList => scalar(BuiltinIndexType::LabelList),
            Self::ZoneMap => scalar(BuiltinIndexType::ZoneMap),
            Self::BloomFilter => scalar(BuiltinIndexType::BloomFilter),
            Self::NGram => scalar(BuiltinIndexType::NGram),
            Self::Inverted => inverted(&get).map(|p| Box::new(p) as _),
            _ => vector(self, &get, rows.max(1)).map(|p| Box::new(p) as _),
        }
    }
}

fn inverted<'a>(get: &impl Fn(&str) -> Option<&'a str>) -> Result<InvertedIndexParams, Error> {
    let mut params = InvertedIndexParams::default();
    if let Some(v) = get("base_tokenizer") {
        params = params.base_tokenizer(v.to_string());
    }
    if let Some(v) = get("language") {
        params = params
            .language(v)
            .map_err(|_| Error::invalid_option("language", v, "is not a language Lance knows"))?;
    }
    if let Some(v) = get("max_token_length") {
        params = params.max_token_length(Some(count("max_token_length", v)?));
    }
    for (key, set) in [
        (
            "with_position",
            InvertedIndexParams::with_position as fn(InvertedIndexParams, bool) -> _,
        ),
        ("lower_case", InvertedIndexParams::lower_case),
        ("stem", InvertedIndexParams::stem),
        ("remove_stop_words", InvertedIndexParams::remove_stop_words),
        ("ascii_folding", InvertedIndexParams::ascii_folding),
    ] {
        if let Some(v) = get(key) {
            params = set(params, parse_bool(key, v)?);
        }
    }
    Ok(params)
}

fn vector<'a>(
    method: IndexMethod,
    get: &impl Fn(&str) -> Option<&'a str>,
    rows: usize,
) -> Result<VectorIndexParams, Error> {
    let metric = match get("metric") {
        None => DistanceType::L2,
        Some(v) => match v.trim().to_ascii_lowercase().as_str() {
            "l2" | "euclidean" => DistanceType::L2,
            "cosine" => DistanceType::Cosine,
            "dot" => DistanceType::Dot,
            _ => {
                return Err(Error::invalid_option(
                    "metric",
                    v,
                    "must be 'l2', 'cosine' or 'dot'",
                ));
            }
        },
    };
    let number = |key: &str| get(key).map(|v| count(key, v)).transpose();
    let mut ivf = IvfBuildParams::default();
    if let Some(n) = number("num_partitions")? {
        ivf = IvfBuildParams::new(n);
    }
    if let Some(n) = number("max_iterations")? {
        ivf.max_iters = n;
    }
    if let Some(n) = number("sample_rate")? {
        ivf.sample_rate = n.min(rows);
    }
    let mut pq = PQBuildParams::default();
    if let Some(n) = number("num_sub_vectors")? {
        pq.num_sub_vectors = n;
    }
    if let Some(v) = get("num_bits") {
        let bits: usize = parse("num_bits", v, "4 or 8")?;
        if bits != 4 && bits != 8 {
            return Err(Error::invalid_option("num_bits", v, "must be 4 or 8"));
        }
        pq.num_bits = bits;
    }
    if let Some(n) = number("max_iterations")? {
        pq.max_iters = n;
    }
    let mut hnsw = HnswBuildParams::default();
    if let Some(n) = number("m")? {
        hnsw = hnsw.num_edges(n.min(rows));
    }
    if let Some(n) = number("ef_construction")? {
        hnsw = hnsw.ef_construction(n.min(rows));
    }
    let sq = SQBuildParams::default();
    Ok(match method {
        IndexMethod::IvfFlat => VectorIndexParams::with_ivf_flat_params(metric, ivf),
        IndexMethod::IvfSq => VectorIndexParams::with_ivf_sq_params(metric, ivf, sq),
        IndexMethod::IvfPq => VectorIndexParams::with_ivf_pq_params(metric, ivf, pq),
        IndexMethod::IvfHnswSq => VectorIndexParams::with_ivf_hnsw_sq_params(metric, ivf, hnsw, sq),
        _ => VectorIndexParams::with_ivf_hnsw_pq_params(metric, ivf, hnsw, pq),
    })
}

/// A positive integer option.
fn count(key: &str, value: &str) -> Result<usize, Error> {
    match parse::<usize>(key, value, "a positive integer")? {
        0 => Err(Error::invalid_option(key, value, "must be greater than 0")),
        n => Ok(n),
    }
}
