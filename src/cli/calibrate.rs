//! `rpcmeter calibrate`: the floors of this machine and of rpcmeter itself, cached per
//! machine (see `crate::calibrate`).
use crate::calibrate::{cache_path, cached_or_measure, table, to_json, Source};
use crate::report::Format;
use std::io::Write as _;
use std::process::ExitCode;

#[derive(clap::Args, Debug)]
pub struct CalibrateArgs {
    /// Output format.
    #[arg(long, value_parser = super::parse::table_or_json(), default_value = "table")]
    pub format: Format,
    /// Measure again, ignoring the cached calibration (the new one replaces it).
    #[arg(long)]
    pub fresh: bool,
}

pub fn main(args: CalibrateArgs) -> anyhow::Result<ExitCode> {
    let calibration = cached_or_measure(args.fresh)?;
    let text = match args.format {
        Format::Json => to_json(&calibration),
        _ => {
            let path = cache_path(std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME"));
            table(&calibration, path.as_deref().filter(|_| calibration.source == Source::Cached))
        }
    };
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| crate::error::output_failed(std::path::Path::new("-"), e))?;
    Ok(ExitCode::SUCCESS)
}
