//! The baseline across restarts (`--baseline-state FILE`, the package puts it in its
//! StateDirectory): the success shapes and the failure patterns learned, written by rename
//! (a crash leaves the old file or the new one, never half of one), bounded in bytes, with
//! the manifest hash of the set they were learned with.
//!
//! The file: one line `probegen-baseline 2 sha256=<hex of the rest>`, then the JSON body. A
//! file of version 1 (before shapes were in call order: their steps in return order) is read
//! whole and marked ([`State::return_order`]): the collector puts its shapes in call order
//! with its manifest's call graph before it merges anything into them. At
//! start a file whose line, checksum or body does not read (damaged) or whose manifest hash
//! is another set's is renamed aside (`FILE.damaged-<unix s>`, `FILE.other-set-<unix s>`),
//! never merged and never deleted; the baseline starts empty.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::expected::Expected;
use super::store::Store;

const MAGIC: &str = "probegen-baseline 2";
/// Version 1: the same body, shapes and exemplars in return order.
const MAGIC_V1: &str = "probegen-baseline 1";

/// What a state file holds.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct State {
    pub manifest_hash: String,
    /// every probe's function, by id (so `baseline show` names what the file holds)
    pub functions: BTreeMap<u32, String>,
    pub store: Store,
    pub expected: Expected,
    /// read from a file of version 1: its shapes' steps (and exemplars') are in return order
    #[serde(skip)]
    pub return_order: bool,
}

/// Why a file is set aside.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Aside {
    Damaged(String),
    OtherSet(String),
}

/// The bytes of `state` within `max_bytes`: the kept durations and exemplars are thinned, then
/// each handler keeps its most common shapes and the per-process sets go, until it fits;
/// `Err` when even that does not.
pub(crate) fn encode(state: &mut State, max_bytes: u64) -> Result<Vec<u8>, String> {
    for level in 0..4 {
        if level > 0 {
            shrink(state, level);
        }
        let body = serde_json::to_vec(&*state).map_err(|e| e.to_string())?;
        let mut out = format!("{MAGIC} sha256={}\n", hex(&Sha256::digest(&body))).into_bytes();
        out.extend_from_slice(&body);
        if out.len() as u64 <= max_bytes {
            return Ok(out);
        }
    }
    Err(format!(
        "does not fit in {max_bytes} bytes even with one shape per handler"
    ))
}

fn shrink(state: &mut State, level: usize) {
    let (durations, exemplars, shapes) = [(64, 1, 32), (8, 0, 4), (8, 0, 1)][level - 1];
    for h in state.store.handlers.values_mut() {
        for s in h.shapes.values_mut() {
            let oldest = s.next.min(s.durations.len());
            s.durations.rotate_left(oldest);
            let cut = s.durations.len().saturating_sub(durations);
            s.durations.drain(..cut);
            s.next = 0;
            s.exemplars.truncate(exemplars);
        }
        let ranked: Vec<Vec<u32>> = h.ranked().iter().map(|(p, _)| p.to_vec()).collect();
        for p in ranked.iter().skip(shapes) {
            if let Some(s) = h.shapes.remove(p) {
                h.other += s.count;
            }
        }
    }
    if level >= 2 {
        state.expected.seen.clear();
    }
}

/// The state in `bytes` if it is whole and of the set `manifest_hash` (any set: `None`).
pub(crate) fn decode(bytes: &[u8], manifest_hash: Option<&str>) -> Result<State, Aside> {
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .ok_or_else(|| Aside::Damaged("no header line".into()))?;
    let (head, body) = (&bytes[..nl], &bytes[nl + 1..]);
    let head = std::str::from_utf8(head).unwrap_or("");
    let (sum, return_order) = [(MAGIC, false), (MAGIC_V1, true)]
        .into_iter()
        .find_map(|(magic, v1)| {
            let sum = head.strip_prefix(magic)?.strip_prefix(" sha256=")?;
            Some((sum, v1))
        })
        .ok_or_else(|| Aside::Damaged(format!("the first line is not `{MAGIC} sha256=...`")))?;
    if sum != hex(&Sha256::digest(body)) {
        return Err(Aside::Damaged("checksum mismatch".into()));
    }
    let mut state: State =
        serde_json::from_slice(body).map_err(|e| Aside::Damaged(format!("body: {e}")))?;
    state.return_order = return_order;
    if let Some(h) = manifest_hash.filter(|&h| h != state.manifest_hash) {
        return Err(Aside::OtherSet(format!(
            "learned with manifest {}, this set is {h}",
            state.manifest_hash
        )));
    }
    Ok(state)
}

/// Reads `path`: `Ok(None)` when there is none; a file set aside is `Err(the warning line)`.
pub(crate) fn load(path: &Path, manifest_hash: &str) -> Result<Option<State>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("baseline state {}: {e}", path.display())),
    };
    let (what, why) = match decode(&bytes, Some(manifest_hash)) {
        Ok(s) => return Ok(Some(s)),
        Err(Aside::Damaged(why)) => ("damaged", why),
        Err(Aside::OtherSet(why)) => ("other-set", why),
    };
    let now = wire::unix_ns(std::time::SystemTime::now()) / 1_000_000_000;
    // never over an earlier file set aside in the same second
    let aside = (0..)
        .map(|n| match n {
            0 => sibling(path, &format!(".{what}-{now}")),
            n => sibling(path, &format!(".{what}-{now}.{n}")),
        })
        .find(|p| !p.exists())
        .unwrap_or_else(|| sibling(path, ".aside"));
    let moved = std::fs::rename(path, &aside).map_or_else(
        |e| format!("not set aside ({e})"),
        |()| format!("set aside as {}", aside.display()),
    );
    Err(format!(
        "baseline state {}: {} ({why}): {moved}; the baseline starts empty",
        path.display(),
        if what == "damaged" {
            "damaged"
        } else {
            "of another probe set"
        }
    ))
}

/// Writes `bytes` to `path` by rename (a temporary beside it, opened as the collector's own
/// file: no link followed, no FIFO, one name; synced first).
pub(crate) fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = sibling(path, ".tmp");
    let (mut f, kind) = wire::open_output(&tmp, true)?;
    if kind != wire::OutputKind::File {
        return Err(std::io::Error::other(format!(
            "{}: a device, expected a regular file",
            tmp.display()
        )));
    }
    f.write_all(bytes)?;
    f.sync_all()?;
    std::fs::rename(&tmp, path)
}

fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let mut s = path.as_os_str().to_os_string();
    s.push(suffix);
    PathBuf::from(s)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// serde for a map whose keys are not strings (a shape's path, a pattern's triple): a list
/// of pairs.
pub(crate) mod pairs {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    pub(crate) fn serialize<K: Serialize, V: Serialize, S: Serializer>(
        m: &BTreeMap<K, V>,
        s: S,
    ) -> Result<S::Ok, S::Error> {
        s.collect_seq(m.iter())
    }

    pub(crate) fn deserialize<'de, K, V, D>(d: D) -> Result<BTreeMap<K, V>, D::Error>
    where
        K: Deserialize<'de> + Ord,
        V: Deserialize<'de>,
        D: Deserializer<'de>,
    {
        Ok(Vec::<(K, V)>::deserialize(d)?.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::super::trace::Trace;
    use super::*;

    fn state(shapes: u32, per_shape: u64) -> State {
        let mut st = State {
            manifest_hash: "sha256:aaa".into(),
            functions: [
                (1, "ib_uverbs_reg_mr".into()),
                (2, "mlx5_ib_reg_user_mr".into()),
            ]
            .into(),
            ..State::default()
        };
        for s in 0..shapes {
            for i in 0..per_shape {
                st.store.add(&Trace {
                    handler: 1,
                    pid: 100 + s,
                    duration_ns: 1000 + i,
                    steps: vec![(2, 0, 5), (3 + s, 0, 9)],
                    comm: *b"verbs_baseline\0\0",
                    ..Trace::default()
                });
            }
        }
        st.expected.failure((1, 2, 22), 7, 10);
        st.expected.success(1, 7, 20);
        st
    }

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("pg-baseline-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("temp dir");
        d
    }

    fn json(st: &State) -> String {
        serde_json::to_string(st).expect("json")
    }

    #[test]
    fn a_state_round_trips_through_its_file() {
        let d = dir("round");
        let path = d.join("baseline.state");
        let mut st = state(3, 40);
        let before = json(&st);
        write(&path, &encode(&mut st, 1 << 20).expect("fits")).expect("write");
        let back = load(&path, "sha256:aaa").expect("whole").expect("present");
        assert_eq!(json(&back), before);
        assert_eq!(back.store.handlers[&1].successes, 120);
        assert_eq!(back.expected.patterns[&(1, 2, 22)].recovered.len(), 1);
        // no temporary left, and a second run finds the same file
        assert!(!d.join("baseline.state.tmp").exists());
        assert!(load(&d.join("absent"), "sha256:aaa")
            .expect("none")
            .is_none());
    }

    #[test]
    fn a_damaged_or_other_set_file_is_set_aside_never_merged() {
        let d = dir("aside");
        let path = d.join("baseline.state");
        let mut bytes = encode(&mut state(2, 5), 1 << 20).expect("fits");
        // one flipped byte in the body: the checksum catches it
        let n = bytes.len() - 3;
        bytes[n] ^= 0x20;
        std::fs::write(&path, &bytes).expect("write");
        let line = load(&path, "sha256:aaa").expect_err("damaged");
        assert!(line.contains("damaged (checksum mismatch)"), "{line}");
        assert!(
            line.contains("set aside as") && line.contains(".damaged-"),
            "{line}"
        );
        assert!(!path.exists(), "the damaged file stays where it was");
        let aside = std::fs::read_dir(&d).expect("dir").count();
        assert_eq!(aside, 1, "renamed, not deleted");
        // not even a header
        std::fs::write(&path, b"{}").expect("write");
        let line = load(&path, "sha256:aaa").expect_err("damaged");
        assert!(line.contains("no header line"), "{line}");
        // whole, but learned with another manifest
        write(&path, &encode(&mut state(2, 5), 1 << 20).expect("fits")).expect("write");
        let line = load(&path, "sha256:bbb").expect_err("other set");
        assert!(line.contains("of another probe set"), "{line}");
        assert!(line.contains("learned with manifest sha256:aaa, this set is sha256:bbb"));
        assert!(line.contains(".other-set-"), "{line}");
        assert!(!path.exists());
        assert_eq!(std::fs::read_dir(&d).expect("dir").count(), 3);
    }

    #[test]
    fn the_file_stays_within_its_bound() {
        let mut st = state(32, 600);
        let full = encode(&mut st.clone(), u64::MAX).expect("unbounded");
        assert!(full.len() > 100_000, "{}", full.len());
        let small = encode(&mut st, 24_000).expect("fits after thinning");
        assert!(small.len() <= 24_000, "{}", small.len());
        let back = decode(&small, Some("sha256:aaa")).expect("whole");
        let h = &back.store.handlers[&1];
        // every success still counted, the most common shapes kept with their last durations
        assert_eq!(h.successes, 32 * 600);
        assert_eq!(
            h.other + h.shapes.values().map(|s| s.count).sum::<u64>(),
            32 * 600
        );
        assert!(h.shapes.values().all(|s| s.durations.last() == Some(&1599)));
        assert!(encode(&mut state(32, 600), 100).is_err());
    }
}
