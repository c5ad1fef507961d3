//! Rank lists written as ranges (`0-511,513-1023`), so that a line about a thousand ranks
//! stays one line. In `i128`, which holds every rank type there is: NCCL's `i32` ranks and
//! the launcher's `u64` ones.

/// Inclusive ranges of consecutive ranks, in order, from ranks in any order (repeats
/// dropped).
pub fn ranges(ranks: impl IntoIterator<Item = i128>) -> Vec<(i128, i128)> {
    let mut ranks: Vec<i128> = ranks.into_iter().collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut ranges: Vec<(i128, i128)> = Vec::new();
    for rank in ranks {
        match ranges.last_mut() {
            Some(last) if last.1 + 1 == rank => last.1 = rank,
            _ => ranges.push((rank, rank)),
        }
    }
    ranges
}

/// `first-last` for each range (`first` alone for one rank), joined by commas, in the
/// order given.
pub fn format_ranges(ranges: &[(i128, i128)]) -> String {
    ranges
        .iter()
        .map(|&(first, last)| {
            if first == last {
                first.to_string()
            } else {
                format!("{first}-{last}")
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// `ranks` sorted, without repeats, consecutive ones as `first-last`, joined by commas.
pub fn format_ranks(ranks: impl IntoIterator<Item = i128>) -> String {
    format_ranges(&ranges(ranks))
}

/// "rank 3" or "ranks 0-2,5": the word agrees with the count.
pub fn ranks_phrase(ranks: impl IntoIterator<Item = i128>) -> String {
    let ranks: Vec<i128> = ranks.into_iter().collect();
    let word = if ranks.len() == 1 { "rank" } else { "ranks" };
    format!("{word} {}", format_ranks(ranks))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_ranks_become_ranges_in_order_without_repeats() {
        assert_eq!(format_ranks([5, 0, 1, 2, 2, 9, 10, 7]), "0-2,5,7,9-10");
        assert_eq!(format_ranks(0..1024), "0-1023");
        assert_eq!(format_ranks([]), "");
        let max = i128::from(u64::MAX);
        assert_eq!(format_ranks([max, max - 1]), format!("{}-{}", max - 1, max));
    }

    #[test]
    fn the_word_agrees_with_the_count() {
        assert_eq!(ranks_phrase([3]), "rank 3");
        assert_eq!(ranks_phrase([0, 1, 2, 5]), "ranks 0-2,5");
    }
}
