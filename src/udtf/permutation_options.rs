//! The `'key=value'` options of `lance_build_permutation` and
//! `lance_permutation`, read into plain data with errors that name the
//! option.

use std::collections::{BTreeMap, HashSet};

use datafusion::arrow::datatypes::DataType;

use crate::config::parse;
use crate::error::{Error, Result};
use crate::physical_plan::{BuildOptions, SplitSelector, SplitSizes, SplitStrategy};

/// The options of a build.
const BUILD_KEYS: &str = "split, ratios, counts, fixed, sizes, seed, clump, columns, weights, \
                          discard, expr, names, shuffle, filter";

/// The options of a read.
const READ_KEYS: &str = "offset, limit, identity, plan_version, base, partitions";

/// `key=value` pairs, each key once.
fn pairs(function: &str, args: &[String], keys: &str) -> Result<BTreeMap<String, String>> {
    let mut map = BTreeMap::new();
    for arg in args {
        let Some((key, value)) = arg.split_once('=') else {
            return Err(Error::UnknownOption {
                key: arg.clone(),
                hint: format!(" for {function}: options are '<key>=<value>' ({keys})"),
            });
        };
        let key = key.trim().to_ascii_lowercase();
        if map.insert(key.clone(), value.trim().to_string()).is_some() {
            return Err(Error::invalid_option(&key, value, "given twice"));
        }
    }
    Ok(map)
}

/// A comma-separated list of `T`.
fn list<T: std::str::FromStr>(key: &str, value: &str, what: &str) -> Result<Vec<T>> {
    let items: Vec<T> = value
        .split(',')
        .map(|item| parse(key, item, what))
        .collect::<Result<_>>()?;
    if items.is_empty() {
        return Err(Error::invalid_option(
            key,
            value,
            format!("expected {what}s"),
        ));
    }
    Ok(items)
}

/// A fresh seed, recorded in the plan, when none is given.
fn fresh_seed() -> u64 {
    rand_08::random()
}

/// Reads a build's options.
pub(crate) fn build_options(function: &str, args: &[String]) -> Result<BuildOptions> {
    let mut o = pairs(function, args, BUILD_KEYS)?;
    let mut take = |key: &str| o.remove(key);
    let split = take("split").unwrap_or_else(|| "single".to_string());
    let seed = take("seed")
        .map(|v| parse::<u64>("seed", &v, "a non-negative integer"))
        .transpose()?;
    let clump = match take("clump") {
        Some(v) => match parse::<u64>("clump", &v, "a positive row count")? {
            0 => return Err(Error::invalid_option("clump", v, "must be greater than 0")),
            n => n,
        },
        None => 1,
    };
    let shuffle = match take("shuffle") {
        Some(v) => crate::config::parse_bool("shuffle", &v)?,
        None => false,
    };
    let names: Vec<String> = match take("names") {
        Some(v) => v.split(',').map(|n| n.trim().to_string()).collect(),
        None => vec![],
    };
    let mut seen = HashSet::new();
    if let Some(bad) = names
        .iter()
        .find(|n| n.is_empty() || !seen.insert(n.as_str()))
    {
        return Err(Error::invalid_option(
            "names",
            names.join(","),
            if bad.is_empty() {
                "a split name is empty".to_string()
            } else {
                format!("split name '{bad}' is given twice")
            },
        ));
    }
    let filter = take("filter");
    let sizes = |take: &mut dyn FnMut(&str) -> Option<String>, with_sizes: bool| {
        let ratios = take("ratios");
        let counts = take("counts").or_else(|| if with_sizes { take("sizes") } else { None });
        let fixed = take("fixed");
        match (ratios, counts, fixed) {
            (Some(r), None, None) => {
                let ratios: Vec<f64> = list("ratios", &r, "a share between 0 and 1")?;
                let sum: f64 = ratios.iter().sum();
                if ratios.iter().any(|r| !(*r > 0.0 && *r <= 1.0)) || sum > 1.0 + 1e-9 {
                    return Err(Error::invalid_option(
                        "ratios",
                        r,
                        "each share must be above 0, and together at most 1",
                    ));
                }
                Ok(SplitSizes::Ratios(ratios))
            }
            (None, Some(c), None) => {
                let counts: Vec<u64> = list("counts", &c, "a positive row count")?;
                if counts.contains(&0) {
                    return Err(Error::invalid_option(
                        "counts",
                        c,
                        "each count must be above 0",
                    ));
                }
                Ok(SplitSizes::Counts(counts))
            }
            (None, None, Some(f)) => match parse::<u64>("fixed", &f, "a number of splits")? {
                n @ 1..=1024 => Ok(SplitSizes::Fixed(n)),
                _ => Err(Error::invalid_option("fixed", f, "must be 1..1024 splits")),
            },
            _ => Err(Error::invalid_input(format!(
                "{function}: split={split} takes exactly one of 'ratios=', 'counts=' or \
                 'fixed='"
            ))),
        }
    };
    let strategy = match split.as_str() {
        "single" => SplitStrategy::Single,
        "random" => SplitStrategy::Random {
            sizes: sizes(&mut take, false)?,
            seed: seed.unwrap_or_else(fresh_seed),
            clump,
        },
        "sequential" => SplitStrategy::Sequential {
            sizes: sizes(&mut take, true)?,
        },
        "hash" => {
            let columns: Vec<String> = take("columns")
                .ok_or_else(|| {
                    Error::invalid_input(format!("{function}: split=hash needs 'columns=a,b'"))
                })?
                .split(',')
                .map(|c| c.trim().to_string())
                .collect();
            let weights = take("weights").ok_or_else(|| {
                Error::invalid_input(format!("{function}: split=hash needs 'weights=80,20'"))
            })?;
            let weights: Vec<u64> = list("weights", &weights, "a positive weight")?;
            if weights.contains(&0) {
                return Err(Error::invalid_option(
                    "weights",
                    crate::physical_plan::permutation_format::join(&weights),
                    "each weight must be above 0",
                ));
            }
            let discard = take("discard")
                .map(|v| parse::<u64>("discard", &v, "a weight"))
                .transpose()?
                .unwrap_or(0);
            SplitStrategy::Hash {
                columns,
                weights,
                discard,
            }
        }
        "calculated" => SplitStrategy::Calculated {
            expr: take("expr").ok_or_else(|| {
                Error::invalid_input(format!(
                    "{function}: split=calculated needs 'expr=<Lance SQL giving 0..n-1>'"
                ))
            })?,
        },
        other => {
            return Err(Error::invalid_option(
                "split",
                other,
                "expected random, hash, sequential or calculated",
            ));
        }
    };
    let shuffle = shuffle.then(|| (seed.unwrap_or_else(fresh_seed), clump));
    if let Some(key) = o.keys().next() {
        return Err(Error::UnknownOption {
            key: key.clone(),
            hint: format!(
                " for {function} with split={split}: its options are {}",
                relevant(&split)
            ),
        });
    }
    if shuffle.is_none() && clump != 1 && !matches!(strategy, SplitStrategy::Random { .. }) {
        return Err(Error::invalid_option(
            "clump",
            clump.to_string(),
            "applies to split=random and shuffle=true",
        ));
    }
    let options = BuildOptions {
        strategy,
        names,
        shuffle,
        filter,
    };
    if let (false, Some(n)) = (options.names.is_empty(), options_split_count(&options))
        && n != options.names.len()
    {
        return Err(Error::invalid_option(
            "names",
            options.names.join(","),
            format!("names {} splits, but the plan has {n}", options.names.len()),
        ));
    }
    Ok(options)
}

/// The split count the strategy alone gives.
fn options_split_count(options: &BuildOptions) -> Option<usize> {
    BuildOptions {
        names: vec![],
        ..options.clone()
    }
    .split_count()
}

fn relevant(split: &str) -> &'static str {
    match split {
        "random" => "ratios|counts|fixed, seed, clump, names, shuffle, filter",
        "sequential" => "sizes|ratios|counts|fixed, names, shuffle, seed, clump, filter",
        "hash" => "columns, weights, discard, names, shuffle, seed, clump, filter",
        "calculated" => "expr, names, shuffle, seed, clump, filter",
        _ => "split, names, shuffle, seed, clump, filter",
    }
}

/// What a read asks for besides the plan.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct ReadOptions {
    pub(crate) offset: u64,
    pub(crate) limit: Option<u64>,
    pub(crate) identity: Option<String>,
    pub(crate) plan_version: Option<u64>,
    pub(crate) base: Option<String>,
    pub(crate) partitions: usize,
}

/// Reads a read's options.
pub(crate) fn read_options(function: &str, args: &[String]) -> Result<ReadOptions> {
    let mut o = pairs(function, args, READ_KEYS)?;
    let mut take = |key: &str| o.remove(key);
    let options = ReadOptions {
        offset: take("offset")
            .map(|v| parse("offset", &v, "a row count"))
            .transpose()?
            .unwrap_or(0),
        limit: take("limit")
            .map(|v| parse("limit", &v, "a row count"))
            .transpose()?,
        identity: take("identity"),
        plan_version: take("plan_version")
            .map(|v| parse("plan_version", &v, "a version number"))
            .transpose()?,
        base: take("base"),
        partitions: match take("partitions") {
            Some(v) => match parse::<usize>("partitions", &v, "a number of partitions")? {
                n @ 1..=4096 => n,
                _ => return Err(Error::invalid_option("partitions", v, "must be 1..4096")),
            },
            None => 1,
        },
    };
    if let Some(key) = o.keys().next() {
        return Err(Error::UnknownOption {
            key: key.clone(),
            hint: format!(" for {function}: its options are {READ_KEYS}"),
        });
    }
    Ok(options)
}

/// The split argument: a number, or a name.
pub(crate) fn selector(value: &datafusion::common::ScalarValue) -> Option<SplitSelector> {
    use datafusion::common::ScalarValue as S;
    match value {
        S::Utf8(Some(s)) | S::Utf8View(Some(s)) | S::LargeUtf8(Some(s)) => {
            Some(SplitSelector::Name(s.clone()))
        }
        S::Int8(Some(_))
        | S::Int16(Some(_))
        | S::Int32(Some(_))
        | S::Int64(Some(_))
        | S::UInt8(Some(_))
        | S::UInt16(Some(_))
        | S::UInt32(Some(_))
        | S::UInt64(Some(_)) => value.cast_to(&DataType::UInt64).ok().and_then(|v| match v {
            S::UInt64(Some(n)) => Some(SplitSelector::Number(n)),
            _ => None,
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn build_options_read_each_strategy_and_refuse_what_does_not_fit() {
        let o = build_options(
            "f",
            &args(&[
                "split=random",
                "ratios=0.8,0.2",
                "seed=7",
                "names=train,test",
            ]),
        )
        .unwrap();
        assert_eq!(
            o.to_string(),
            "split=random;ratios=0.8,0.2;seed=7;clump=1;names=train,test"
        );
        let o = build_options(
            "f",
            &args(&["split=hash", "columns=a,b", "weights=80,20", "discard=5"]),
        )
        .unwrap();
        assert!(
            o.to_string()
                .starts_with("split=hash;columns=a,b;weights=80,20;discard=5")
        );
        let e = build_options("f", &args(&["split=random", "weights=1"])).unwrap_err();
        assert!(e.to_string().contains("exactly one of 'ratios='"), "{e}");
        let e = build_options("f", &args(&["split=random", "fixed=2", "weights=1"])).unwrap_err();
        assert!(e.to_string().contains("weights"), "{e}");
        let e = build_options("f", &args(&["split=random", "ratios=0.8,0.3"])).unwrap_err();
        assert!(e.to_string().contains("together at most 1"), "{e}");
        let e =
            build_options("f", &args(&["split=sequential", "sizes=5,5", "names=a"])).unwrap_err();
        assert!(
            e.to_string().contains("names 1 splits, but the plan has 2"),
            "{e}"
        );
        let e = build_options("f", &args(&["split=magic"])).unwrap_err();
        assert!(e.to_string().contains("expected random, hash"), "{e}");
        let o = build_options("f", &args(&["shuffle=true", "seed=3", "clump=4"])).unwrap();
        assert_eq!(o.shuffle, Some((3, 4)));
    }

    #[test]
    fn read_options_are_checked() {
        let o = read_options("f", &args(&["offset=5", "limit=10", "partitions=4"])).unwrap();
        assert_eq!((o.offset, o.limit, o.partitions), (5, Some(10), 4));
        let e = read_options("f", &args(&["seed=1"])).unwrap_err();
        assert!(e.to_string().contains("offset, limit, identity"), "{e}");
    }
}
