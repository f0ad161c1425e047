//! What the running kernel offers the probes besides the bundle's choice, and what the agent
//! does when a part is missing: `/sys/kernel/btf/vmlinux` (every fexit and fentry program is
//! resolved in it), `/proc/kallsyms` (the kprobe path and the compiler clones are found in it
//! by name) and `kernel.kptr_restrict` (which hides kallsyms' addresses, or with them its
//! names from a process without CAP_SYSLOG). Read under `--sys-root` (tests give a temp dir).

use std::io::Read;
use std::path::Path;

use sink_prometheus::NoSet;

/// What `/proc/kallsyms` shows this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kallsyms {
    /// Names and addresses.
    Listed,
    /// Names with every address zero (`kptr_restrict`): the agent reads only the names.
    AddressesHidden,
    /// Unreadable, or no symbol in it.
    Unreadable,
}

/// The kernel's inputs the attach depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HostInputs {
    pub(crate) vmlinux_btf: bool,
    pub(crate) kallsyms: Kallsyms,
    /// `kernel.kptr_restrict` as the kernel prints it (`None`: unreadable)
    pub(crate) kptr_restrict: Option<String>,
}

/// The head of kallsyms read to tell its state (its first symbols say it; the file is large).
const KALLSYMS_HEAD: u64 = 16 << 10;

impl HostInputs {
    pub(crate) fn read(root: &Path) -> Self {
        let mut head = String::new();
        let read = std::fs::File::open(root.join("proc/kallsyms"))
            .and_then(|f| f.take(KALLSYMS_HEAD).read_to_string(&mut head));
        let addresses: Vec<&str> = head
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = it.next()?;
                it.next()?;
                it.next().map(|_| addr)
            })
            .collect();
        let kallsyms = if read.is_err() || addresses.is_empty() {
            Kallsyms::Unreadable
        } else if addresses.iter().all(|a| a.bytes().all(|b| b == b'0')) {
            Kallsyms::AddressesHidden
        } else {
            Kallsyms::Listed
        };
        HostInputs {
            vmlinux_btf: root.join("sys/kernel/btf/vmlinux").exists(),
            kallsyms,
            kptr_restrict: std::fs::read_to_string(root.join("proc/sys/kernel/kptr_restrict"))
                .ok()
                .map(|s| s.trim().to_string()),
        }
    }

    fn kptr_restrict(&self) -> String {
        self.kptr_restrict
            .as_deref()
            .map_or("kernel.kptr_restrict unreadable".into(), |v| {
                format!("kernel.kptr_restrict = {v}")
            })
    }
}

/// A chosen set's probes as the inputs matter to them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SetProbes {
    /// every probe of the set (the error path's and the data plane's)
    pub(crate) probes: usize,
    /// those that attach by name without BTF: a kprobe fallback, or a kretprobe on a clone
    pub(crate) kprobe_path: usize,
}

impl SetProbes {
    /// Counted from a set's manifest.
    pub(crate) fn of(m: &manifest::Manifest) -> Self {
        let attachable: Vec<&manifest::Probe> = m.attachable().collect();
        SetProbes {
            probes: attachable.len() + m.data_plane.len(),
            kprobe_path: attachable
                .iter()
                .filter(|p| p.has_kprobe_fallback() || p.attach == manifest::Attach::CloneOnly)
                .count(),
        }
    }
}

/// What the agent does about the inputs for the set it chose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Attach it; each line says what is missing and what that changes.
    Attach(Vec<String>),
    /// Nothing can attach: why, and the line that says it.
    Nothing(NoSet, String),
}

/// The verdict for set `dir` with `probes` on a kernel with `inputs`.
pub(crate) fn judge(inputs: &HostInputs, dir: &str, probes: SetProbes) -> Verdict {
    let mut lines = Vec::new();
    let names = match inputs.kallsyms {
        Kallsyms::Listed => true,
        Kallsyms::AddressesHidden => {
            lines.push(format!(
                "/proc/kallsyms: addresses hidden ({}): the agent reads only the symbol names, which are listed: nothing changes",
                inputs.kptr_restrict()
            ));
            true
        }
        Kallsyms::Unreadable => {
            lines.push(format!(
                "/proc/kallsyms unreadable or empty ({}): the kprobe path and the compiler clones cannot be found; probes attach by BTF alone",
                inputs.kptr_restrict()
            ));
            false
        }
    };
    if inputs.vmlinux_btf {
        return Verdict::Attach(lines);
    }
    let missing = "no /sys/kernel/btf/vmlinux (a kernel without CONFIG_DEBUG_INFO_BTF): no fexit or fentry program can attach";
    if names && probes.kprobe_path > 0 {
        lines.push(format!(
            "{missing}; set {dir}: the {} of its {} probes with a kprobe path attach by it, the rest are reported not attached",
            probes.kprobe_path, probes.probes
        ));
        return Verdict::Attach(lines);
    }
    let why = if names {
        "none of its probes has a kprobe path"
    } else {
        "/proc/kallsyms is unreadable, so no kprobe path either"
    };
    Verdict::Nothing(
        NoSet::NoKernelBtf,
        format!("{missing}; set {dir}: {why}: nothing attached"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake root: `btf` makes sys/kernel/btf/vmlinux, `kallsyms` is proc/kallsyms' text
    /// (`None`: no file), `kptr` kernel.kptr_restrict.
    fn root(name: &str, btf: bool, kallsyms: Option<&str>, kptr: &str) -> std::path::PathBuf {
        let r = std::env::temp_dir().join(format!("pg-host-{name}-{}", std::process::id()));
        std::fs::remove_dir_all(&r).ok();
        std::fs::create_dir_all(r.join("sys/kernel/btf")).expect("dir");
        std::fs::create_dir_all(r.join("proc/sys/kernel")).expect("dir");
        if btf {
            std::fs::write(r.join("sys/kernel/btf/vmlinux"), b"BTF").expect("btf");
        }
        if let Some(k) = kallsyms {
            std::fs::write(r.join("proc/kallsyms"), k).expect("kallsyms");
        }
        std::fs::write(r.join("proc/sys/kernel/kptr_restrict"), format!("{kptr}\n")).expect("kptr");
        r
    }

    const LISTED: &str =
        "ffffffff81000000 T _text\nffffffffc0a01000 t ib_uverbs_reg_mr\t[ib_uverbs]\n";
    const HIDDEN: &str =
        "0000000000000000 T _text\n0000000000000000 t ib_uverbs_reg_mr\t[ib_uverbs]\n";

    #[test]
    fn each_missing_input_is_one_line_and_a_decision() {
        let set = SetProbes {
            probes: 50,
            kprobe_path: 12,
        };
        let judged = |name: &str, btf: bool, k: Option<&str>, kptr: &str, set: SetProbes| {
            let r = root(name, btf, k, kptr);
            let inputs = HostInputs::read(&r);
            std::fs::remove_dir_all(&r).ok();
            (inputs.kallsyms, judge(&inputs, "linux-6.12/mlx5", set))
        };
        // all there: nothing said
        assert_eq!(
            judged("all", true, Some(LISTED), "0", set),
            (Kallsyms::Listed, Verdict::Attach(Vec::new()))
        );
        // kptr_restrict: the addresses are zero, the names are what the agent reads
        let (k, v) = judged("kptr", true, Some(HIDDEN), "2", set);
        assert_eq!(k, Kallsyms::AddressesHidden);
        let Verdict::Attach(lines) = v else {
            panic!("{v:?}")
        };
        assert_eq!(lines.len(), 1);
        assert!(
            lines[0].contains("addresses hidden (kernel.kptr_restrict = 2)"),
            "{lines:?}"
        );
        assert!(lines[0].ends_with("nothing changes"), "{lines:?}");
        // kallsyms unreadable: BTF alone
        let (k, v) = judged("nokallsyms", true, None, "2", set);
        assert_eq!(k, Kallsyms::Unreadable);
        assert!(
            matches!(&v, Verdict::Attach(l) if l.len() == 1 && l[0].contains("probes attach by BTF alone")),
            "{v:?}"
        );
        // no vmlinux BTF: the kprobe path, with the count it has
        let (_, v) = judged("nobtf", false, Some(LISTED), "0", set);
        assert!(
            matches!(&v, Verdict::Attach(l) if l.len() == 1 && l[0].starts_with("no /sys/kernel/btf/vmlinux") && l[0].contains("the 12 of its 50 probes with a kprobe path attach by it")),
            "{v:?}"
        );
        // no vmlinux BTF and no kprobe path: nothing, and why
        let none = SetProbes {
            probes: 50,
            kprobe_path: 0,
        };
        let (_, v) = judged("nobtf-none", false, Some(LISTED), "0", none);
        assert!(
            matches!(&v, Verdict::Nothing(NoSet::NoKernelBtf, l) if l.ends_with("none of its probes has a kprobe path: nothing attached")),
            "{v:?}"
        );
        // no vmlinux BTF and kallsyms hidden: nothing either
        let (_, v) = judged("nobtf-nokallsyms", false, Some(""), "2", set);
        assert!(
            matches!(&v, Verdict::Nothing(NoSet::NoKernelBtf, l) if l.contains("/proc/kallsyms is unreadable")),
            "{v:?}"
        );
    }
}
