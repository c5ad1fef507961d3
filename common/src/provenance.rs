//! How a run was made: the environment variables worth keeping with its trace, and the
//! names under which the trace and `run.json` record them.
//!
//! The plugin writes them as OTF2 global properties of each process's part (the merge
//! carries them into the job's archive), and `nccl-scorep run`/`exec` write them into the
//! experiment directory's `run.json`, so a trace found months later still says which NCCL,
//! which settings and which command made it.

use std::collections::BTreeMap;

/// The namespace of our OTF2 properties (`NCCL_SCOREP::<NAME>`; OTF2 wants one).
pub const PROPERTY_NAMESPACE: &str = "NCCL_SCOREP";

/// The experiment directory's description of the run.
pub const RUN_JSON_FILE: &str = "run.json";

/// The version of `run.json`'s layout (docs/launcher.md).
pub const RUN_JSON_SCHEMA: &str = "nccl-scorep-run/1";

/// NCCL variables that change which algorithm, protocol, transport or how many channels
/// NCCL uses, and so what the trace shows; kept with the trace when they are set.
pub const NCCL_VARIABLES: &[&str] = &[
    "NCCL_ALGO",
    "NCCL_PROTO",
    "NCCL_P2P_DISABLE",
    "NCCL_P2P_LEVEL",
    "NCCL_SHM_DISABLE",
    "NCCL_NET",
    "NCCL_NET_GDR_LEVEL",
    "NCCL_IB_DISABLE",
    "NCCL_IB_HCA",
    "NCCL_SOCKET_IFNAME",
    "NCCL_CROSS_NIC",
    "NCCL_COLLNET_ENABLE",
    "NCCL_NVLS_ENABLE",
    "NCCL_PXN_DISABLE",
    "NCCL_MIN_NCHANNELS",
    "NCCL_MAX_NCHANNELS",
    "NCCL_MIN_CTAS",
    "NCCL_MAX_CTAS",
    "NCCL_NTHREADS",
    "NCCL_BUFFSIZE",
    "NCCL_TOPO_FILE",
    "NCCL_GRAPH_FILE",
    "NCCL_PROFILER_PLUGIN",
    "NCCL_PROFILE_EVENT_MASK",
];

/// Whether `name` is worth keeping with the trace: every `NCCL_SCOREP_*` variable, and
/// the NCCL variables that change what NCCL does ([`NCCL_VARIABLES`]).
pub fn is_recorded(name: &str) -> bool {
    name.starts_with("NCCL_SCOREP_") || NCCL_VARIABLES.contains(&name)
}

/// The recorded variables among `variables` (name, value), sorted by name.
pub fn recorded_environment<I, K, V>(variables: I) -> BTreeMap<String, String>
where
    I: IntoIterator<Item = (K, V)>,
    K: AsRef<str>,
    V: AsRef<str>,
{
    variables
        .into_iter()
        .filter(|(name, _)| is_recorded(name.as_ref()))
        .map(|(name, value)| (name.as_ref().to_owned(), value.as_ref().to_owned()))
        .collect()
}

/// The recorded variables of this process's environment (values that are not UTF-8 are
/// kept with their invalid bytes replaced).
pub fn recorded_environment_of_process() -> BTreeMap<String, String> {
    recorded_environment(std::env::vars_os().filter_map(|(name, value)| {
        let name = name.into_string().ok()?;
        Some((name, value.to_string_lossy().into_owned()))
    }))
}

/// The OTF2 property name of `name`: `NCCL_SCOREP::NAME`.
pub fn property(name: &str) -> String {
    format!("{PROPERTY_NAMESPACE}::{name}")
}

/// The OTF2 property name of a count of what the plugin lost or refused (one of its
/// counters): `NCCL_SCOREP::LOST::<COUNTER>`. The merge adds up the parts' values.
pub fn lost_property(counter: &str) -> String {
    format!(
        "{PROPERTY_NAMESPACE}::LOST::{}",
        counter.to_ascii_uppercase()
    )
}

/// The counter a `NCCL_SCOREP::LOST::…` property counts (lower case), if it is one.
pub fn counter_of_lost_property(name: &str) -> Option<String> {
    name.strip_prefix(&format!("{PROPERTY_NAMESPACE}::LOST::"))
        .map(str::to_ascii_lowercase)
}

/// The OTF2 property name of an environment variable: `NCCL_SCOREP::ENV::<VARIABLE>`.
pub fn environment_property(variable: &str) -> String {
    format!("{PROPERTY_NAMESPACE}::ENV::{variable}")
}

/// The variable an environment property names, if `property` is one.
pub fn variable_of_property(property: &str) -> Option<&str> {
    property
        .strip_prefix(PROPERTY_NAMESPACE)?
        .strip_prefix("::ENV::")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_our_variables_and_those_that_change_nccl_are_kept() {
        let kept = recorded_environment([
            ("NCCL_SCOREP_EVENTS", "all"),
            ("NCCL_ALGO", "ring"),
            ("NCCL_DEBUG", "INFO"),
            ("HOME", "/root"),
            ("NCCL_SCOREPX", "no"),
        ]);
        assert_eq!(
            kept.into_iter().collect::<Vec<_>>(),
            [
                ("NCCL_ALGO".to_owned(), "ring".to_owned()),
                ("NCCL_SCOREP_EVENTS".to_owned(), "all".to_owned())
            ]
        );
    }

    #[test]
    fn environment_properties_name_their_variable() {
        let name = environment_property("NCCL_PROTO");
        assert_eq!(name, "NCCL_SCOREP::ENV::NCCL_PROTO");
        assert_eq!(variable_of_property(&name), Some("NCCL_PROTO"));
        assert_eq!(variable_of_property("NCCL_SCOREP::NCCL_VERSION"), None);
        assert_eq!(property("NCCL_VERSION"), "NCCL_SCOREP::NCCL_VERSION");
    }
}
