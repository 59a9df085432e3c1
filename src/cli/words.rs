//! The words of `run RUN-ARGS` as clap reads them, so that `kube` (the pods' args) and
//! `run --shards` (the children's) can take out or replace a flag while every other word
//! stays as the user wrote it: the one argv rewriter, clap's, so a cluster such as `-qo FILE`
//! is read as clap reads it.

/// What becomes of a flag in the rewritten words.
pub enum Becomes {
    /// Left as the user wrote it.
    Kept,
    /// Taken out (set by whoever rewrites, or moved elsewhere).
    Dropped,
    /// Replaced by these words (at its first occurrence).
    Words(Vec<String>),
}

/// `words` with each flag (by clap id) in `becomes` replaced or taken out; every other word
/// as written. A cluster of short flags holding one that changes (`-qD FILE`) is written out
/// flag by flag.
pub fn rewrite(command: &clap::Command, words: &[String], becomes: &[(impl AsRef<str>, Becomes)]) -> Vec<String> {
    let flags = flags(command, words);
    let fate = |id: &str| becomes.iter().find(|(b, _)| b.as_ref() == id).map(|(_, f)| f).unwrap_or(&Becomes::Kept);
    let mut out = Vec::new();
    let mut placed = std::collections::HashSet::new();
    let mut i = 0;
    while i < words.len() {
        let here: Vec<_> = flags.iter().filter(|f| f.first == i).collect();
        if here.is_empty() {
            out.push(words[i].clone());
            i += 1;
            continue;
        }
        let end = here[0].last.max(i + 1);
        if here.iter().all(|f| matches!(fate(&f.id), Becomes::Kept)) {
            out.extend(words[i..end].iter().cloned());
        } else {
            for f in here {
                match fate(&f.id) {
                    Becomes::Kept => {
                        let arg = command.get_arguments().find(|a| a.get_id() == f.id.as_str());
                        let name = arg.and_then(|a| a.get_long()).map(|l| format!("--{l}")).unwrap_or_default();
                        out.push(name);
                        out.extend(f.value.clone());
                    }
                    Becomes::Dropped => {}
                    Becomes::Words(w) => {
                        if placed.insert(f.id.clone()) {
                            out.extend(w.iter().cloned());
                        }
                    }
                }
            }
        }
        i = end;
    }
    out
}

/// One flag as given: its id (RunArgs' field name), its value, and the words it spans.
#[derive(Debug, Clone)]
pub struct Flag {
    pub id: String,
    pub value: Option<String>,
    /// words[first..last] hold it (with other flags when it is in a cluster such as `-qD f`).
    pub first: usize,
    pub last: usize,
}

/// The flags of `words` (the words after `run`, whose flags `command` declares), in order; positionals are not listed. The
/// words have already been accepted by clap, so every flag is known.
pub fn flags(command: &clap::Command, words: &[String]) -> Vec<Flag> {
    let long = |name: &str| command.get_arguments().find(|a| a.get_long() == Some(name));
    let short = |c: char| command.get_arguments().find(|a| a.get_short() == Some(c));
    let takes = |a: &clap::Arg| a.get_action().takes_values();
    let mut found = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let word = &words[i];
        if word == "--" {
            break;
        }
        if let Some(rest) = word.strip_prefix("--") {
            let (name, inline) = match rest.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (rest, None),
            };
            if let Some(arg) = long(name) {
                let mut flag = Flag { id: arg.get_id().to_string(), value: inline, first: i, last: i + 1 };
                if takes(arg) && flag.value.is_none() {
                    flag.value = words.get(i + 1).cloned();
                    flag.last = (i + 2).min(words.len());
                }
                i = flag.last;
                found.push(flag);
                continue;
            }
        } else if let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) {
            let start = found.len();
            let mut end = i + 1;
            for (at, c) in cluster.char_indices() {
                let Some(arg) = short(c) else { break };
                let mut flag = Flag { id: arg.get_id().to_string(), value: None, first: i, last: i + 1 };
                if takes(arg) {
                    let rest = &cluster[at + c.len_utf8()..];
                    let rest = rest.strip_prefix('=').unwrap_or(rest);
                    if rest.is_empty() {
                        flag.value = words.get(i + 1).cloned();
                        end = (i + 2).min(words.len());
                    } else {
                        flag.value = Some(rest.to_owned());
                    }
                    found.push(flag);
                    break;
                }
                found.push(flag);
            }
            for f in &mut found[start..] {
                f.last = end;
            }
            i = end;
            continue;
        }
        i += 1;
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(s: &str) -> Vec<String> {
        s.split(' ').map(String::from).collect()
    }

    #[test]
    fn clusters_are_split_where_a_flag_changes() {
        let words = w("--plaintext -qo out.json -qc 8 --format=json h:1");
        let becomes = [("quiet", Becomes::Dropped), ("output", Becomes::Dropped), ("format", Becomes::Dropped)];
        assert_eq!(rewrite(&crate::cli::run::command(), &words, &becomes), w("--plaintext --concurrency 8 h:1"));
    }

    #[test]
    fn spans_of_long_short_and_clusters() {
        let words = w("--plaintext -qD d.json --proto=a.proto -i x,y --rps -5 h:1 --format json");
        let got: Vec<_> =
            flags(&<crate::cli::run::RunArgs as clap::Args>::augment_args(clap::Command::new("run")), &words)
                .into_iter()
                .map(|f| (f.id, f.value.unwrap_or_default(), f.first, f.last))
                .collect();
        let want = [
            ("plaintext", "", 0, 1),
            ("quiet", "", 1, 3),
            ("data_file", "d.json", 1, 3),
            ("proto", "a.proto", 3, 4),
            ("import_paths", "x,y", 4, 6),
            ("rps", "-5", 6, 8),
            ("format", "json", 9, 11),
        ];
        let want: Vec<_> = want.iter().map(|(a, b, c, d)| (a.to_string(), b.to_string(), *c, *d)).collect();
        assert_eq!(got, want);
    }
}
