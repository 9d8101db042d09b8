//! `StatusSet`: a set of HTTP status codes parsed from `"429,500-503,5xx"` (R4.4).

use std::fmt;

/// A set of status codes 100..=599 as a bitset; O(1) membership.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct StatusSet {
    bits: [u64; 10],
}

const MIN: u16 = 100;
const MAX: u16 = 599;

impl StatusSet {
    pub fn empty() -> Self {
        Self::default()
    }

    /// Parse a comma-separated list of codes (`429`), ranges (`500-503`) and classes (`5xx`).
    ///
    /// Whitespace around items is ignored; an entirely empty (or blank) string is the
    /// empty set. Empty items (`"429,,500"`), reversed ranges and codes outside 100..=599
    /// are errors.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut set = StatusSet::empty();
        if text.trim().is_empty() {
            return Ok(set);
        }
        for raw in text.split(',') {
            let item = raw.trim();
            if item.is_empty() {
                return Err(format!("empty item in status set {text:?}"));
            }
            let (lo, hi) = parse_item(item)?;
            for code in lo..=hi {
                set.insert(code);
            }
        }
        Ok(set)
    }

    pub fn insert(&mut self, code: u16) {
        if code < 640 {
            self.bits[(code / 64) as usize] |= 1 << (code % 64);
        }
    }

    pub fn contains(&self, code: u16) -> bool {
        code < 640 && self.bits[(code / 64) as usize] & (1 << (code % 64)) != 0
    }

    pub fn is_empty(&self) -> bool {
        self.bits.iter().all(|word| *word == 0)
    }

    /// Maximal runs of consecutive members, ascending.
    pub fn ranges(&self) -> Vec<(u16, u16)> {
        let mut out: Vec<(u16, u16)> = Vec::new();
        for code in MIN..=MAX {
            if !self.contains(code) {
                continue;
            }
            match out.last_mut() {
                Some((_, hi)) if *hi + 1 == code => *hi = code,
                _ => out.push((code, code)),
            }
        }
        out
    }
}

fn parse_code(text: &str, item: &str) -> Result<u16, String> {
    let code: u16 = text
        .trim()
        .parse()
        .map_err(|_| format!("{item:?} is not a status code, range or class"))?;
    if !(MIN..=MAX).contains(&code) {
        return Err(format!("status code {code} is outside 100-599"));
    }
    Ok(code)
}

fn parse_item(item: &str) -> Result<(u16, u16), String> {
    let lower = item.to_ascii_lowercase();
    if lower.len() == 3 && lower.ends_with("xx") {
        let class = lower.as_bytes()[0];
        if (b'1'..=b'5').contains(&class) {
            let lo = u16::from(class - b'0') * 100;
            return Ok((lo, lo + 99));
        }
        return Err(format!("{item:?} is not a status class (1xx..5xx)"));
    }
    if let Some((first, last)) = item.split_once('-') {
        let lo = parse_code(first, item)?;
        let hi = parse_code(last, item)?;
        if lo > hi {
            return Err(format!("range {item:?} is reversed"));
        }
        return Ok((lo, hi));
    }
    let code = parse_code(item, item)?;
    Ok((code, code))
}

impl fmt::Display for StatusSet {
    /// The canonical form: sorted, merged, e.g. `401-407,409-499`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (lo, hi)) in self.ranges().into_iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            if lo == hi {
                write!(f, "{lo}")?;
            } else {
                write!(f, "{lo}-{hi}")?;
            }
        }
        Ok(())
    }
}

impl fmt::Debug for StatusSet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canon(text: &str) -> String {
        StatusSet::parse(text).unwrap().to_string()
    }

    #[test]
    fn sorts_and_merges() {
        assert_eq!(canon("500-503,429,525-599"), "429,500-503,525-599");
        assert_eq!(canon("5xx"), "500-599");
        assert_eq!(canon("4XX, 5xx"), "400-599");
        assert_eq!(canon("500-510, 505-520,521"), "500-521");
        assert_eq!(canon(" 429 , 429"), "429");
        assert_eq!(canon(""), "");
        assert_eq!(canon("   "), "");
        // adjacent ranges merge
        assert_eq!(
            canon("100-199,300-399,401-407,409-499,500-503,505-523,525-599"),
            "100-199,300-399,401-407,409-503,505-523,525-599"
        );
    }

    #[test]
    fn membership() {
        let set = StatusSet::parse("429,5xx").unwrap();
        assert!(set.contains(429) && set.contains(500) && set.contains(599));
        assert!(!set.contains(428) && !set.contains(600) && !set.contains(499));
        assert!(format!("{set:?}") == "429,500-599");
    }

    #[test]
    fn rejects_garbage() {
        for bad in [
            "abc", "429,,500", "429,", "99", "600", "503-500", "6xx", "0xx", "4x", "5xx-6", "1-2",
            "429;500", "-", "500-",
        ] {
            assert!(StatusSet::parse(bad).is_err(), "{bad:?} should fail");
        }
    }
}
