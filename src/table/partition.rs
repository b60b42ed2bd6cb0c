//! Splitting a table version's fragments into balanced groups: one group per
//! DataFusion partition.

use std::cmp::Reverse;

use lance_table::format::Fragment;

pub(crate) use crate::physical_plan::scan::live_rows;

/// Groups `fragments` into at most `max_groups` groups balanced by live rows
/// (borrowing them: a version may hold 100,000 fragments).
///
/// * no fragments → no groups;
/// * at most `max_groups` fragments → one group per fragment;
/// * otherwise largest-first greedy assignment to the lightest group, which
///   keeps every group within one fragment of the mean. Fragments keep their
///   table order inside a group.
pub(crate) fn group_fragments(fragments: &[Fragment], max_groups: usize) -> Vec<Vec<&Fragment>> {
    let max_groups = max_groups.max(1);
    if fragments.len() <= max_groups {
        return fragments.iter().map(|f| vec![f]).collect();
    }
    // Heaviest first; ties by position so the result is deterministic. Each
    // fragment's weight is read once (a sort by key reads it at every
    // comparison: about 2 ms for 100,000 fragments).
    let mut order: Vec<(Reverse<usize>, usize)> = fragments
        .iter()
        .enumerate()
        .map(|(i, f)| (Reverse(live_rows(f)), i))
        .collect();
    order.sort_unstable();
    let mut loads = vec![0usize; max_groups];
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); max_groups];
    for (Reverse(weight), i) in order {
        let lightest = (0..max_groups)
            .min_by_key(|&g| (loads[g], g))
            .expect("max_groups >= 1");
        loads[lightest] += weight;
        members[lightest].push(i);
    }
    let mut groups: Vec<Vec<&Fragment>> = members
        .into_iter()
        .filter(|m| !m.is_empty())
        .map(|mut m| {
            m.sort_unstable();
            m.into_iter().map(|i| &fragments[i]).collect()
        })
        .collect();
    // Groups in table order of their first fragment.
    groups.sort_by_key(|g| g.first().map(|f| f.id));
    groups
}

/// The shortest prefix of `fragments` holding at least `limit` live rows.
pub(crate) fn prefix_covering(fragments: &[Fragment], limit: usize) -> Vec<&Fragment> {
    let mut rows = 0usize;
    let mut out = Vec::new();
    for f in fragments {
        if rows >= limit {
            break;
        }
        rows += f.num_rows().unwrap_or(0);
        out.push(f);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frag(id: u64, rows: usize) -> Fragment {
        let mut f = Fragment::new(id);
        f.physical_rows = Some(rows);
        f
    }

    fn loads(groups: &[Vec<&Fragment>]) -> Vec<usize> {
        groups
            .iter()
            .map(|g| g.iter().map(|f| live_rows(f)).sum())
            .collect()
    }

    #[test]
    fn groups_are_balanced_and_complete() {
        let frags: Vec<_> = (0..37)
            .map(|i| frag(i, [1, 1000, 50, 7, 300][i as usize % 5]))
            .collect();
        for n in [1, 2, 3, 7, 8, 36, 37, 64] {
            let groups = group_fragments(&frags, n);
            assert_eq!(groups.len(), n.min(37), "n={n}");
            let mut ids: Vec<u64> = groups.iter().flatten().map(|f| f.id).collect();
            ids.sort_unstable();
            assert_eq!(ids, (0..37).collect::<Vec<_>>());
            let l = loads(&groups);
            let (min, max) = (l.iter().min().unwrap(), l.iter().max().unwrap());
            assert!(max - min <= 1000, "n={n} loads={l:?}");
            for g in &groups {
                assert!(g.windows(2).all(|w| w[0].id < w[1].id));
            }
        }
    }

    #[test]
    fn deleted_rows_do_not_count() {
        use lance_table::format::{DeletionFile, DeletionFileType};
        // Four fragments of 1000 physical rows; the first two are 90% deleted.
        let frags: Vec<_> = (0..4)
            .map(|i| {
                let mut f = frag(i, 1000);
                if i < 2 {
                    f.deletion_file = Some(DeletionFile {
                        read_version: 1,
                        id: i,
                        file_type: DeletionFileType::Array,
                        num_deleted_rows: Some(900),
                        base_id: None,
                    });
                }
                f
            })
            .collect();
        assert_eq!(live_rows(&frags[0]), 100);
        let groups = group_fragments(&frags, 3);
        // By physical rows the two thin fragments would not share a group.
        let ids: Vec<Vec<u64>> = groups
            .iter()
            .map(|g| g.iter().map(|f| f.id).collect())
            .collect();
        assert_eq!(ids, vec![vec![0, 1], vec![2], vec![3]]);
        assert_eq!(loads(&groups), vec![200, 1000, 1000]);
    }

    #[test]
    fn empty_and_small_inputs() {
        assert!(group_fragments(&[], 4).is_empty());
        let two = [frag(3, 10), frag(9, 1)];
        let groups = group_fragments(&two, 4);
        assert_eq!(groups.len(), 2);
        assert_eq!(group_fragments(&[frag(1, 1)], 0).len(), 1);
    }

    #[test]
    fn prefix_covers_limit() {
        let frags = vec![frag(0, 5), frag(1, 5), frag(2, 5)];
        assert_eq!(prefix_covering(&frags, 0).len(), 0);
        assert_eq!(prefix_covering(&frags, 5).len(), 1);
        assert_eq!(prefix_covering(&frags, 6).len(), 2);
        assert_eq!(prefix_covering(&frags, 100).len(), 3);
    }
}
