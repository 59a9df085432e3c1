//! gRPC statuses: the one list of their names, and per-status counters indexed by code.
use tonic::Code;

/// Status codes 0..=16: the length of every per-status counter.
pub const COUNT: usize = 17;

/// Names as gRPC spells them (OK, UNAVAILABLE, ...), indexed by code.
const NAMES: [&str; COUNT] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// The gRPC name of a code: `name(Code::Unavailable) == "UNAVAILABLE"`.
pub fn name(code: Code) -> &'static str {
    NAMES.get(code as usize).copied().unwrap_or("UNKNOWN")
}

/// A code from its gRPC name, in any case; `None` for a name gRPC does not have.
pub fn parse(text: &str) -> Option<Code> {
    let upper = text.trim().to_ascii_uppercase();
    NAMES.iter().position(|&n| n == upper).map(|i| Code::from_i32(i as i32))
}

/// Every name, for messages that list what is accepted.
pub fn names() -> &'static [&'static str] {
    &NAMES
}

/// A counter per status code.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerStatus([u64; COUNT]);

impl PerStatus {
    pub fn record(&mut self, code: Code) {
        self.0[code as usize % COUNT] += 1;
    }

    /// Counts `n` more of `code` at once (a count read back from a result).
    pub fn record_many(&mut self, code: Code, n: u64) {
        let count = &mut self.0[code as usize % COUNT];
        *count = count.saturating_add(n);
    }

    pub fn get(&self, code: Code) -> u64 {
        self.0[code as usize % COUNT]
    }

    pub fn total(&self) -> u64 {
        self.0.iter().sum()
    }

    pub fn add(&mut self, other: &PerStatus) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine += theirs;
        }
    }

    /// Takes out counts that `other` added before (saturating: never below zero).
    pub fn subtract(&mut self, other: &PerStatus) {
        for (mine, theirs) in self.0.iter_mut().zip(other.0) {
            *mine = mine.saturating_sub(theirs);
        }
    }

    /// The statuses that occurred, in code order.
    pub fn nonzero(&self) -> impl Iterator<Item = (Code, u64)> + '_ {
        self.0.iter().enumerate().filter(|(_, &n)| n > 0).map(|(i, &n)| (Code::from_i32(i as i32), n))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_codes_round_trip() {
        for i in 0..COUNT as i32 {
            let code = Code::from_i32(i);
            assert_eq!(parse(name(code)), Some(code));
        }
        assert_eq!(parse("resource_exhausted"), Some(Code::ResourceExhausted));
        assert_eq!(parse("NOPE"), None);
    }

    #[test]
    fn counts_list_what_occurred() {
        let mut c = PerStatus::default();
        c.record(Code::Ok);
        c.record(Code::Unavailable);
        c.record(Code::Ok);
        assert_eq!(c.nonzero().collect::<Vec<_>>(), vec![(Code::Ok, 2), (Code::Unavailable, 1)]);
        assert_eq!(c.total(), 3);
    }
}
