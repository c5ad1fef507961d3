//! Natural order of names: runs of digits compare as numbers (`thread 9` before
//! `thread 10`), so that lists of locations, channels and lanes read in order.

/// A name's sort key in natural order.
pub fn natural_key(name: &str) -> Vec<(String, u64)> {
    let mut key = Vec::new();
    let mut text = String::new();
    let mut chars = name.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some(digit) = c.to_digit(10) {
            let mut number = u64::from(digit);
            while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
                number = number.saturating_mul(10).saturating_add(u64::from(d));
                chars.next();
            }
            key.push((std::mem::take(&mut text), number));
        } else {
            text.push(c);
        }
    }
    key.push((text, 0));
    key
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_names_sort_as_numbers() {
        let mut names = ["rank 1 proxy lane 10", "rank 1 proxy lane 9", "rank 1 ops"];
        names.sort_by_cached_key(|name| natural_key(name));
        assert_eq!(
            names,
            ["rank 1 ops", "rank 1 proxy lane 9", "rank 1 proxy lane 10"]
        );
    }
}
