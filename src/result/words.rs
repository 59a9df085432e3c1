//! The result's closed sets of words (a run's mode, its arrivals, its stream kind, a
//! steady-state verdict), typed: what every format, merge and compare match on. In JSON
//! each is the word results have always held, so scripts read them as before; renaming one
//! would change a key's meaning (a new major, result/mod.rs `SCHEMA_VERSION`).
use serde::{Deserialize, Serialize};

/// A word of one of the result's sets as read: one this version knows, or the word a newer
/// minor version wrote (kept as it is, so the result reads and writes back unchanged).
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq, Eq)]
#[serde(untagged)]
pub enum Word<T> {
    Known(T),
    Other(String),
}

/// Results written without the key read it as no word at all (written back as "").
impl<T> Default for Word<T> {
    fn default() -> Word<T> {
        Word::Other(String::new())
    }
}

/// A set of words: each value's word as results hold it.
pub trait Words: Copy {
    fn as_str(self) -> &'static str;
}

impl<T: Words> Word<T> {
    pub fn known(&self) -> Option<T> {
        match self {
            Word::Known(k) => Some(*k),
            Word::Other(_) => None,
        }
    }

    /// The word as written.
    pub fn as_str(&self) -> &str {
        match self {
            Word::Known(k) => k.as_str(),
            Word::Other(word) => word,
        }
    }
}

impl<T> From<T> for Word<T> {
    fn from(known: T) -> Word<T> {
        Word::Known(known)
    }
}

impl<T: Words> std::fmt::Display for Word<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An enum of a result's words: each value and its word written once, here (serde reads and
/// writes it, `as_str` names it, `ALL` lists them).
macro_rules! words {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $variant:ident = $word:literal,)* }) => {
        $(#[$m])*
        #[derive(Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vm])* #[serde(rename = $word)] $variant,)*
        }

        impl Words for $name {
            fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $word,)*
                }
            }
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant),*];
        }
    };
}
pub(crate) use words;

words! {
    /// How the calls were paced (`mode`).
    Mode {
        Closed = "closed",
        Open = "open",
        Burst = "burst",
        /// A merge of inputs of different modes (2.4; each input's own is its `shards[].mode`).
        /// Before 2.4 a merge joined them ("closed, open"), read as this.
        Mixed = "mixed",
    }
}

words! {
    /// An open loop's arrivals (`meta.arrival.process`).
    Process {
        Uniform = "uniform",
        Poisson = "poisson",
        /// `run --replay`: the log's own schedule.
        Logged = "logged",
    }
}

words! {
    /// A method's kind (`messages.kind`, present for streaming methods).
    StreamKind {
        Unary = "unary",
        ClientStreaming = "client streaming",
        ServerStreaming = "server streaming",
        Bidi = "bidirectional streaming",
    }
}

words! {
    /// Whether the latency (`steady_state.verdict`) or a burst's round times (`warm_rounds`)
    /// settled.
    Verdict {
        Steady = "steady",
        NoSteadyState = "no steady state",
        TooShort = "too short to judge",
        EmptyInterval = "an interval without calls",
        /// No call succeeded: a failure's latency says nothing of the service's, however flat.
        NotJudged = "not judged: no call succeeded",
    }
}

impl<T: Words + serde::de::DeserializeOwned> Word<T> {
    /// A word from its text, as a result holds it.
    pub fn read(text: &str) -> Word<T> {
        serde_json::from_value(text.into()).unwrap_or_else(|_| Word::Other(text.to_string()))
    }
}

/// `mode` as read: a merge written before 2.4 joined its inputs' modes ("closed, open"),
/// which reads as `mixed` (and is written back so).
pub fn mode<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Word<Mode>, D::Error> {
    let joined = |w: &str| w.contains(", ") && w.split(", ").all(|m| Word::<Mode>::read(m).known().is_some());
    Ok(match Word::<Mode>::deserialize(d)? {
        Word::Other(w) if joined(&w) => Word::Known(Mode::Mixed),
        word => word,
    })
}
