//! Assigning a base's rows to splits and ordering each split: pure
//! functions over the row ids a scan of the base returned (in its order),
//! so every strategy is tested without a table.

use super::format::{BuildOptions, SplitMix64, SplitStrategy};

/// What a strategy needs of each row besides its id.
#[derive(Debug)]
pub(crate) enum Keys {
    /// Nothing (single, random and sequential splits).
    None,
    /// Its hash (hash splits).
    Hashes(Vec<u64>),
    /// The split its expression gave (calculated splits).
    Splits(Vec<Option<i64>>),
}

/// Each split's row ids, in plan order: `row_ids` (and `keys`, one per
/// row) in the base's order.
pub(crate) fn assign(
    options: &BuildOptions,
    row_ids: &[u64],
    keys: Keys,
) -> Result<Vec<Vec<u64>>, String> {
    let rows = row_ids.len() as u64;
    // Positions (into `row_ids`) of each split, in the base's order.
    let mut splits: Vec<Vec<u64>> = match (&options.strategy, keys) {
        (SplitStrategy::Single, _) => vec![(0..rows).collect()],
        (SplitStrategy::Random { sizes, seed, clump }, _) => {
            let counts = sizes.counts(rows)?;
            let shuffled = clumped_shuffle((0..rows).collect(), *clump, *seed);
            let mut splits = cut(&shuffled, &counts);
            for split in &mut splits {
                split.sort_unstable();
            }
            splits
        }
        (SplitStrategy::Sequential { sizes }, _) => {
            let counts = sizes.counts(rows)?;
            cut(&(0..rows).collect::<Vec<_>>(), &counts)
        }
        (
            SplitStrategy::Hash {
                weights, discard, ..
            },
            Keys::Hashes(hashes),
        ) => {
            let total: u64 = weights.iter().sum::<u64>() + discard;
            let mut splits = vec![Vec::new(); weights.len()];
            for (position, hash) in hashes.iter().enumerate() {
                let mut bucket = hash % total;
                for (split, weight) in weights.iter().enumerate() {
                    if bucket < *weight {
                        splits[split].push(position as u64);
                        break;
                    }
                    bucket -= weight;
                }
            }
            splits
        }
        (SplitStrategy::Calculated { .. }, Keys::Splits(values)) => {
            calculated(options, row_ids, &values)?
        }
        (strategy, keys) => {
            return Err(format!(
                "internal: {strategy:?} cannot use the row keys {keys:?}"
            ));
        }
    };
    if let Some((seed, clump)) = options.shuffle {
        for (i, split) in splits.iter_mut().enumerate() {
            // Each split its own stream: one split's size does not move
            // another's order.
            let taken = std::mem::take(split);
            *split = clumped_shuffle(taken, clump, seed.wrapping_add(i as u64));
        }
    }
    for (i, split) in splits.iter().enumerate() {
        if split.is_empty() {
            return Err(format!(
                "split {} would hold no rows (of {rows}); a plan's splits each hold at least \
                 one row",
                split_label(options, i)
            ));
        }
    }
    Ok(splits
        .into_iter()
        .map(|positions| positions.into_iter().map(|p| row_ids[p as usize]).collect())
        .collect())
}

/// `'name'` (number) or number.
pub(crate) fn split_label(options: &BuildOptions, split: usize) -> String {
    match options.names.get(split) {
        Some(name) => format!("'{name}' ({split})"),
        None => split.to_string(),
    }
}

fn calculated(
    options: &BuildOptions,
    row_ids: &[u64],
    values: &[Option<i64>],
) -> Result<Vec<Vec<u64>>, String> {
    let declared = (!options.names.is_empty()).then_some(options.names.len());
    let mut splits: Vec<Vec<u64>> = vec![Vec::new(); declared.unwrap_or(0)];
    for (position, value) in values.iter().enumerate() {
        let row = row_ids[position];
        let Some(value) = *value else {
            return Err(format!("the expression gave NULL for row id {row}"));
        };
        let split = usize::try_from(value)
            .ok()
            .filter(|s| declared.is_none_or(|n| *s < n))
            .ok_or_else(|| match declared {
                Some(n) => format!(
                    "the expression gave {value} for row id {row}; with {n} names it must \
                     give 0..{}",
                    n - 1
                ),
                None => {
                    format!("the expression gave {value} for row id {row}; it must give 0..n-1")
                }
            })?;
        if split >= splits.len() {
            splits.resize(split + 1, Vec::new());
        }
        splits[split].push(position as u64);
    }
    Ok(splits)
}

/// `items` cut into consecutive runs of `counts` (what is past their sum
/// is in no split).
fn cut(items: &[u64], counts: &[u64]) -> Vec<Vec<u64>> {
    let mut start = 0usize;
    counts
        .iter()
        .map(|count| {
            let end = start + *count as usize;
            let run = items[start..end].to_vec();
            start = end;
            run
        })
        .collect()
}

/// `items` in an order drawn with `seed`, moving in clumps of `clump`
/// consecutive items.
fn clumped_shuffle(items: Vec<u64>, clump: u64, seed: u64) -> Vec<u64> {
    let mut rng = SplitMix64::new(seed);
    if clump <= 1 {
        let mut items = items;
        rng.shuffle(&mut items);
        return items;
    }
    let mut clumps: Vec<&[u64]> = items.chunks(clump as usize).collect();
    rng.shuffle(&mut clumps);
    clumps.concat()
}

#[cfg(test)]
mod tests {
    use super::super::format::SplitSizes;
    use super::*;

    fn options(strategy: SplitStrategy) -> BuildOptions {
        BuildOptions {
            strategy,
            names: vec![],
            shuffle: None,
            filter: None,
        }
    }

    fn ids(n: u64) -> Vec<u64> {
        (0..n).map(|i| 1000 + i).collect()
    }

    #[test]
    fn random_splits_are_disjoint_cover_their_counts_and_keep_base_order() {
        let o = options(SplitStrategy::Random {
            sizes: SplitSizes::Ratios(vec![0.8, 0.2]),
            seed: 7,
            clump: 1,
        });
        let splits = assign(&o, &ids(103), Keys::None).unwrap();
        assert_eq!(splits[0].len(), 82);
        assert_eq!(splits[1].len(), 21);
        let mut all: Vec<u64> = splits.concat();
        all.sort();
        assert_eq!(all, ids(103));
        assert!(splits[0].windows(2).all(|w| w[0] < w[1]));
        // The same seed, the same plan; another seed, another.
        assert_eq!(splits, assign(&o, &ids(103), Keys::None).unwrap());
        let other = options(SplitStrategy::Random {
            sizes: SplitSizes::Ratios(vec![0.8, 0.2]),
            seed: 8,
            clump: 1,
        });
        assert_ne!(splits, assign(&other, &ids(103), Keys::None).unwrap());
    }

    #[test]
    fn clumps_move_together() {
        let mut o = options(SplitStrategy::Single);
        o.shuffle = Some((3, 10));
        let split = &assign(&o, &ids(100), Keys::None).unwrap()[0];
        assert_ne!(split, &ids(100));
        for clump in split.chunks(10) {
            assert!(clump.windows(2).all(|w| w[1] == w[0] + 1), "{clump:?}");
            assert_eq!((clump[0] - 1000) % 10, 0);
        }
    }

    #[test]
    fn fixed_splits_keep_every_row_and_counts_must_fit() {
        let o = options(SplitStrategy::Sequential {
            sizes: SplitSizes::Fixed(3),
        });
        let splits = assign(&o, &ids(10), Keys::None).unwrap();
        assert_eq!(splits.iter().map(Vec::len).collect::<Vec<_>>(), [4, 3, 3]);
        assert_eq!(splits[0], [1000, 1001, 1002, 1003]);
        let too_many = options(SplitStrategy::Sequential {
            sizes: SplitSizes::Counts(vec![5, 6]),
        });
        let err = assign(&too_many, &ids(10), Keys::None).unwrap_err();
        assert!(
            err.contains("ask for 11 rows, but the base has 10"),
            "{err}"
        );
    }

    #[test]
    fn hash_buckets_follow_weights_and_discard() {
        let o = options(SplitStrategy::Hash {
            columns: vec!["k".into()],
            weights: vec![1, 1],
            discard: 2,
        });
        let hashes = vec![0, 1, 2, 3, 4, 5, 6, 7];
        let splits = assign(&o, &ids(8), Keys::Hashes(hashes)).unwrap();
        assert_eq!(splits, [vec![1000, 1004], vec![1001, 1005]]);
    }

    #[test]
    fn calculated_splits_check_their_values_and_empty_splits_fail() {
        let mut o = options(SplitStrategy::Calculated { expr: "x".into() });
        let splits = assign(&o, &ids(3), Keys::Splits(vec![Some(1), Some(0), Some(1)])).unwrap();
        assert_eq!(splits, [vec![1001], vec![1000, 1002]]);
        let err = assign(&o, &ids(2), Keys::Splits(vec![Some(0), None])).unwrap_err();
        assert_eq!(err, "the expression gave NULL for row id 1001");
        let err = assign(&o, &ids(2), Keys::Splits(vec![Some(0), Some(2)])).unwrap_err();
        assert!(err.contains("split 1 would hold no rows"), "{err}");
        o.names = vec!["a".into(), "b".into()];
        let err = assign(&o, &ids(2), Keys::Splits(vec![Some(0), Some(2)])).unwrap_err();
        assert!(err.contains("with 2 names it must give 0..1"), "{err}");
    }
}
