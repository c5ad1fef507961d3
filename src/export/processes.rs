//! `--processes`: which processes of a job to export, by their launcher rank (the number
//! in the trace's `process <rank> (pid …)`, the low half of their locations' ids).

use std::fmt;

use nccl_scorep_common::rank_ranges;

use otf2_sys::read::GlobalDefs;

use super::layout::process_of;

/// A set of process ranks, as ranges: `0-7,42`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Processes {
    /// Inclusive ranges, in the order given.
    ranges: Vec<(u64, u64)>,
}

impl Processes {
    /// Parses `RANK` or `FIRST-LAST`, separated by commas (`0-7,42`).
    pub fn parse(text: &str) -> Result<Processes, String> {
        let number = |part: &str| {
            part.trim().parse::<u64>().map_err(|_| {
                format!("`{part}` is not a rank: give ranks and ranges such as 0-7,42")
            })
        };
        let mut ranges = Vec::new();
        for part in text.split(',') {
            let range = match part.split_once('-') {
                Some((first, last)) => (number(first)?, number(last)?),
                None => {
                    let rank = number(part)?;
                    (rank, rank)
                }
            };
            if range.0 > range.1 {
                return Err(format!(
                    "`{part}` is an empty range: its first rank is the larger"
                ));
            }
            ranges.push(range);
        }
        Ok(Processes { ranges })
    }

    /// The processes of a trace's locations with events, as ranges of consecutive ranks.
    pub fn of_trace(defs: &GlobalDefs) -> Processes {
        let ranks = defs
            .locations
            .iter()
            .filter(|l| l.number_of_events > 0)
            .map(|l| i128::from(process_of(l.id)));
        let ranges = rank_ranges::ranges(ranks)
            .into_iter()
            // Every value came from a u64.
            .map(|(first, last)| (first as u64, last as u64))
            .collect();
        Processes { ranges }
    }

    /// Whether the process of rank `rank` is one of them.
    pub fn contains(&self, rank: u64) -> bool {
        self.ranges
            .iter()
            .any(|&(first, last)| (first..=last).contains(&rank))
    }
}

impl fmt::Display for Processes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ranges: Vec<(i128, i128)> = self
            .ranges
            .iter()
            .map(|&(first, last)| (i128::from(first), i128::from(last)))
            .collect();
        f.write_str(&rank_ranges::format_ranges(&ranges))
    }
}

#[cfg(test)]
mod tests {
    use super::Processes;

    #[test]
    fn ranks_and_ranges_are_read_and_written_back() {
        let processes = Processes::parse("0-7, 42,9-9").unwrap();
        for rank in [0, 3, 7, 9, 42] {
            assert!(processes.contains(rank), "{rank}");
        }
        for rank in [8, 10, 41, 43] {
            assert!(!processes.contains(rank), "{rank}");
        }
        assert_eq!(processes.to_string(), "0-7,42,9");
    }

    #[test]
    fn what_is_not_a_rank_list_is_refused_with_the_reason() {
        assert!(Processes::parse("7-3").unwrap_err().contains("empty range"));
        assert!(Processes::parse("a").unwrap_err().contains("is not a rank"));
        assert!(Processes::parse("1,,2")
            .unwrap_err()
            .contains("is not a rank"));
        assert!(Processes::parse("-3")
            .unwrap_err()
            .contains("is not a rank"));
    }
}
