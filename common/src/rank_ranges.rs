//! Rank lists written as ranges (`0-511,513-1023`), so that a line about a thousand ranks
//! stays one line.

/// `ranks` sorted, without repeats, consecutive ones as `first-last`, joined by commas.
pub fn format_ranks(ranks: impl IntoIterator<Item = i64>) -> String {
    let mut ranks: Vec<i64> = ranks.into_iter().collect();
    ranks.sort_unstable();
    ranks.dedup();
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    for rank in ranks {
        match ranges.last_mut() {
            Some(last) if last.1.checked_add(1) == Some(rank) => last.1 = rank,
            _ => ranges.push((rank, rank)),
        }
    }
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

/// "rank 3" or "ranks 0-2,5": the word agrees with the count.
pub fn ranks_phrase(ranks: impl IntoIterator<Item = i64>) -> String {
    let ranks: Vec<i64> = ranks.into_iter().collect();
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
        assert_eq!(
            format_ranks([i64::MAX, i64::MAX - 1]),
            format!("{}-{}", i64::MAX - 1, i64::MAX)
        );
    }

    #[test]
    fn the_word_agrees_with_the_count() {
        assert_eq!(ranks_phrase([3]), "rank 3");
        assert_eq!(ranks_phrase([0, 1, 2, 5]), "ranks 0-2,5");
    }
}
