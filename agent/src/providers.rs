//! `collect --provider-probes`: the provider stage's flags (`stage-providers`), opened for a
//! live run beside the built-in stages.

use std::path::PathBuf;

use collector::{CollectError, Stage};
use stage_providers::{ProviderStage, ProviderStageOptions};

/// Where the package installs the uprobe's object and the provider table.
const PACKAGE_DIR: &str = "/usr/lib/probegen/providers";

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ProviderArgs {
    /// Also record the error completions only a user-space provider sees (mlx5): a uprobe on
    /// the error-completion function of each provider library the host's processes map, at the
    /// offset the provider table resolved for its build-id (a build it does not name is named
    /// and never probed); with the QP's job and peer (live)
    #[arg(long)]
    pub provider_probes: bool,
    /// The compiled uprobe (default: the package's, /usr/lib/probegen/providers/mlx5_cqe.bpf.o)
    #[arg(long, value_name = "FILE", requires = "provider_probes")]
    pub provider_object: Option<PathBuf>,
    /// The provider table (default: the package's, /usr/lib/probegen/providers/providers.yaml)
    #[arg(long, value_name = "FILE", requires = "provider_probes")]
    pub provider_table: Option<PathBuf>,
    /// Look for newly mapped provider libraries every N snapshots (a probed library's later
    /// processes are covered at once)
    #[arg(
        long,
        value_name = "N",
        default_value_t = 6,
        requires = "provider_probes"
    )]
    pub provider_rescan: u64,
}

impl ProviderArgs {
    /// The stage's options, `None` without `--provider-probes`.
    pub(crate) fn options(
        &self,
        proc_root: PathBuf,
        job_vars: &[String],
    ) -> Option<ProviderStageOptions> {
        self.provider_probes.then(|| ProviderStageOptions {
            object: self
                .provider_object
                .clone()
                .unwrap_or_else(|| PathBuf::from(PACKAGE_DIR).join("mlx5_cqe.bpf.o")),
            table: self
                .provider_table
                .clone()
                .unwrap_or_else(|| PathBuf::from(PACKAGE_DIR).join("providers.yaml")),
            proc_root,
            job_vars: job_vars.to_vec(),
            rescan_windows: self.provider_rescan,
        })
    }
}

/// The stage, started (its object loaded, the first scan made).
pub(crate) fn start(opts: &ProviderStageOptions) -> Result<Box<dyn Stage>, CollectError> {
    ProviderStage::start(opts)
        .map(|s| Box::new(s) as Box<dyn Stage>)
        .map_err(|e| CollectError::Option(e.to_string()))
}
