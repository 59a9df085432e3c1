//! `--format json`: the result as one object, keys sorted (`result::Run::to_json_pretty`).
//! Its keys are a stable interface (docs/design.md, "Stable interfaces"); new keys are only
//! ever added. The call-latency histogram rides along so that runs merge exactly.
use super::Export;
use crate::result::Run;

pub struct Json;

impl Export for Json {
    fn render(&self, run: &Run) -> String {
        run.to_json_pretty()
    }
}
