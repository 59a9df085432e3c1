//! What qualifies a result's numbers: one list of notices, each with its kind, so that
//! scripts can act on it. Written as two keys, as results always were: `notices`, the texts
//! in order, and `warnings`, each with its kind.
use super::words::{words, Word, Words};
use serde::{Deserialize, Serialize};

words! {
    /// What qualifies the numbers, by kind (`warnings[].kind`).
    NoticeKind {
        Partial = "partial",
        ClosedLoop = "closed_loop",
        BehindSchedule = "behind_schedule",
        ScheduleLag = "schedule_lag",
        Unsent = "unsent",
        ClientCpu = "client_cpu",
        SharedCores = "shared_cores",
        LittlesLaw = "littles_law",
        Abandoned = "abandoned",
        ServerCount = "server_count",
        ServerThroughput = "server_throughput",
        WarmUp = "warm_up",
        NoSteadyState = "no_steady_state",
        Hiccups = "client_hiccups",
        SlowBackend = "slow_backend",
        DownBackend = "down_backend",
        FailedChecks = "failed_checks",
        FlowsStopped = "flows_stopped",
        /// A merge's own (2.4): what it added, and how.
        Merged = "merged",
        /// Its inputs differ in mode, method or target (2.4).
        MixedInputs = "mixed_inputs",
        /// One of its inputs' clients held the rate back (2.4).
        ClientBottleneck = "client_bottleneck",
        /// A coordinated run's shard is missing from its merged result (2.4).
        ShardMissing = "shard_missing",
        /// A lost shard's result, rebuilt from the intervals it sent (2.4).
        Rebuilt = "rebuilt",
        /// `merge` of a stream: a line that is not a result, left out (2.4).
        LeftOut = "left_out",
        /// A merge whose inputs' interval series (or per-backend one) cannot be added
        /// interval by interval: the series is left out, and why said (2.6).
        SeriesLeftOut = "series_left_out",
    }
}

/// A notice's kind as read: one this version knows, or the word a newer minor wrote.
pub type Kind = Word<NoticeKind>;

/// One notice: its kind (none in results written without `warnings`, before 1.x had them,
/// and for the notices a merge or a coordinator added before 2.4) and its text.
#[derive(Debug, Clone, PartialEq)]
pub struct Notice {
    pub kind: Option<Kind>,
    pub message: String,
}

/// The notices, in order: the one list behind `notices` and `warnings`.
#[derive(Serialize, Deserialize, Debug, Clone, Default, PartialEq)]
#[serde(from = "Written", into = "Written")]
pub struct Notices(pub Vec<Notice>);

/// A notice as `warnings` holds it.
#[derive(Serialize, Deserialize, Debug, Clone, PartialEq)]
pub struct Warning {
    #[serde(default)]
    pub kind: Kind,
    #[serde(default)]
    pub message: String,
}

/// The two keys the list is written as.
#[derive(Serialize, Deserialize, Clone)]
struct Written {
    #[serde(default)]
    notices: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    warnings: Option<Vec<Warning>>,
}

impl Notices {
    pub fn push(&mut self, kind: NoticeKind, message: impl Into<String>) {
        self.0.push(Notice { kind: Some(Word::Known(kind)), message: message.into() });
    }

    pub fn texts(&self) -> impl Iterator<Item = &str> {
        self.0.iter().map(|n| n.message.as_str())
    }

    /// Whether a notice of this kind is among them.
    pub fn has(&self, kind: NoticeKind) -> bool {
        self.0.iter().any(|n| n.kind.as_ref().and_then(Word::known) == Some(kind))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Each text with the kind of its warning: they were written in one order, so the next
/// warning is the next text's when their messages agree (a text without one, as a
/// coordinator added them before 2.4, has no kind); warnings beyond the texts are kept after.
impl From<Written> for Notices {
    fn from(w: Written) -> Notices {
        let mut warnings = w.warnings.unwrap_or_default().into_iter().peekable();
        let mut list: Vec<Notice> = w
            .notices
            .into_iter()
            .map(|message| Notice { kind: warnings.next_if(|w| w.message == message).map(|w| w.kind), message })
            .collect();
        list.extend(warnings.map(|w| Notice { kind: Some(w.kind), message: w.message }));
        Notices(list)
    }
}

/// `warnings` lists the notices that have a kind; it is left out, as it was read, when none
/// of several has one (a result written without it).
impl From<Notices> for Written {
    fn from(n: Notices) -> Written {
        let unkinded = !n.0.is_empty() && n.0.iter().all(|n| n.kind.is_none());
        let warnings = n.0.iter().filter_map(|n| Some(Warning { kind: n.kind.clone()?, message: n.message.clone() }));
        let warnings = (!unkinded).then(|| warnings.collect());
        Written { notices: n.0.into_iter().map(|n| n.message).collect(), warnings }
    }
}
