//! The handler mix per job: the same verb can go through different handlers (a registration
//! through `reg_mr` or through `reg_dmabuf_mr`, a QP through the write command or the ioctl
//! method); per job (cgroup) the traced calls of each handler, grouped by verb, and for each
//! verb whose main handler in this job is the main handler of no other job that used the verb
//! (at least `MIN_OTHERS` of them) a line in `differs`. Bounded: `MAX_JOBS` cgroups, later
//! ones counted in `other`.

use std::collections::BTreeMap;

use wire::{JobMixOut, VerbMixOut};

const MAX_JOBS: usize = 256;
const MIN_OTHERS: usize = 2;

/// Handler names (after [`strip`]) that are one verb, and the verb's name.
const VERBS: &[(&str, &[&str])] = &[
    ("reg_mr", &["reg_mr", "reg_dmabuf_mr", "dm_mr_reg"]),
    ("create_qp", &["create_qp", "qp_create"]),
    ("create_cq", &["create_cq", "cq_create"]),
    ("create_srq", &["create_srq", "create_xsrq", "srq_create"]),
    ("create_wq", &["create_wq", "wq_create"]),
    ("destroy_qp", &["destroy_qp", "qp_destroy"]),
    ("destroy_cq", &["destroy_cq", "cq_destroy"]),
];

fn strip(handler: &str) -> String {
    let h = handler.to_ascii_lowercase();
    let h = h
        .strip_prefix("ib_uverbs_handler_uverbs_method_")
        .or_else(|| h.strip_prefix("ib_uverbs_"))
        .unwrap_or(&h);
    h.strip_prefix("ex_").unwrap_or(h).to_string()
}

/// The verb a handler serves (its own name without the uverbs prefix when it is the only one).
pub(crate) fn verb_of(handler: &str) -> String {
    let h = strip(handler);
    VERBS
        .iter()
        .find(|(_, names)| names.contains(&h.as_str()))
        .map_or(h, |(v, _)| (*v).to_string())
}

#[derive(Debug, Default)]
pub(crate) struct Jobs {
    /// per cgroup: traced calls per handler probe id, and the first caller's comm
    jobs: BTreeMap<u64, (BTreeMap<u32, u64>, String)>,
    /// traced calls of cgroups past the bound
    pub other: u64,
}

/// One job's calls: verb -> handler name -> traced calls.
type Mix = BTreeMap<String, BTreeMap<String, u64>>;

impl Jobs {
    pub(crate) fn add(&mut self, cgroup: u64, handler: u32, comm: &str) {
        if !self.jobs.contains_key(&cgroup) && self.jobs.len() >= MAX_JOBS {
            self.other += 1;
            return;
        }
        let j = self
            .jobs
            .entry(cgroup)
            .or_insert_with(|| (BTreeMap::new(), comm.to_string()));
        *j.0.entry(handler).or_default() += 1;
    }

    pub(crate) fn out(&self, name: &dyn Fn(u32) -> String) -> Vec<JobMixOut> {
        let mixes: Vec<(u64, &str, Mix)> = self
            .jobs
            .iter()
            .map(|(&cg, (calls, comm))| {
                let mut mix = Mix::new();
                for (&h, &n) in calls {
                    let f = name(h);
                    *mix.entry(verb_of(&f)).or_default().entry(f).or_default() += n;
                }
                (cg, comm.as_str(), mix)
            })
            .collect();
        mixes
            .iter()
            .map(|(cg, comm, mix)| JobMixOut {
                cgroup_id: *cg,
                comm: (*comm).to_string(),
                differs: differs(*cg, mix, &mixes),
                verbs: mix
                    .iter()
                    .map(|(v, hs)| VerbMixOut {
                        verb: v.clone(),
                        handlers: hs.clone(),
                    })
                    .collect(),
            })
            .collect()
    }
}

/// The handler most of a job's calls of a verb went through (ties: the first by name).
fn main_handler(hs: &BTreeMap<String, u64>) -> Option<&str> {
    hs.iter()
        .max_by(|a, b| a.1.cmp(b.1).then_with(|| b.0.cmp(a.0)))
        .map(|(h, _)| h.as_str())
}

/// The verbs whose main handler in job `cg` is no other job's, as lines.
fn differs(cg: u64, mix: &Mix, all: &[(u64, &str, Mix)]) -> Vec<String> {
    let mut out = Vec::new();
    for (verb, hs) in mix {
        let Some(mine) = main_handler(hs) else {
            continue;
        };
        let others: Vec<&str> = all
            .iter()
            .filter(|(o, _, _)| *o != cg)
            .filter_map(|(_, _, m)| m.get(verb).and_then(main_handler))
            .collect();
        if others.len() >= MIN_OTHERS && !others.contains(&mine) {
            let mut theirs: Vec<&str> = others.clone();
            theirs.sort_unstable();
            theirs.dedup();
            out.push(format!(
                "{verb} through {mine} ({} calls); the {} other jobs through {}",
                hs[mine],
                others.len(),
                theirs.join(", ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const REG: u32 = 1;
    const DMABUF: u32 = 2;
    const QP: u32 = 3;
    const QP_IOCTL: u32 = 4;

    fn name(id: u32) -> String {
        match id {
            REG => "ib_uverbs_reg_mr",
            DMABUF => "ib_uverbs_handler_UVERBS_METHOD_REG_DMABUF_MR",
            QP => "ib_uverbs_create_qp",
            QP_IOCTL => "ib_uverbs_handler_UVERBS_METHOD_QP_CREATE",
            _ => "ib_uverbs_alloc_pd",
        }
        .to_string()
    }

    #[test]
    fn verbs_group_their_handlers() {
        assert_eq!(verb_of("ib_uverbs_reg_mr"), "reg_mr");
        assert_eq!(verb_of(&name(DMABUF)), "reg_mr");
        assert_eq!(verb_of("ib_uverbs_ex_create_qp"), "create_qp");
        assert_eq!(verb_of(&name(QP_IOCTL)), "create_qp");
        assert_eq!(verb_of("ib_uverbs_rereg_mr"), "rereg_mr");
        assert_eq!(verb_of("ib_uverbs_alloc_pd"), "alloc_pd");
    }

    #[test]
    fn a_job_whose_registrations_took_another_handler_is_flagged() {
        let mut j = Jobs::default();
        // three jobs register through reg_mr, one through the dmabuf method (and one reg_mr)
        for cg in 10..13 {
            for _ in 0..5 {
                j.add(cg, REG, "trainer");
            }
            j.add(cg, QP, "trainer");
        }
        for _ in 0..7 {
            j.add(20, DMABUF, "nvshmem");
        }
        j.add(20, REG, "nvshmem");
        j.add(20, QP, "nvshmem");
        // a job that only allocates PDs differs in nothing it shares
        j.add(30, 99, "other");
        let out = j.out(&name);
        assert_eq!(out.len(), 5);
        let odd = out.iter().find(|o| o.cgroup_id == 20).expect("job 20");
        assert_eq!(
            odd.differs,
            [format!(
                "reg_mr through {} (7 calls); the 3 other jobs through ib_uverbs_reg_mr",
                name(DMABUF)
            )]
        );
        let reg = odd
            .verbs
            .iter()
            .find(|v| v.verb == "reg_mr")
            .expect("reg_mr");
        assert_eq!(reg.handlers.values().sum::<u64>(), 8);
        assert!(out
            .iter()
            .filter(|o| o.cgroup_id != 20)
            .all(|o| o.differs.is_empty()));
        // one other job is no majority: nothing flagged
        let mut two = Jobs::default();
        two.add(1, REG, "a");
        two.add(2, DMABUF, "b");
        assert!(two.out(&name).iter().all(|o| o.differs.is_empty()));
    }

    #[test]
    fn jobs_are_bounded() {
        let mut j = Jobs::default();
        for cg in 0..(MAX_JOBS as u64 + 10) {
            j.add(cg, REG, "x");
        }
        j.add(0, REG, "x");
        assert_eq!((j.jobs.len(), j.other), (MAX_JOBS, 10));
        assert_eq!(j.jobs[&0].0[&REG], 2);
    }
}
