//! errno names: the x86-64 Linux table 1..133 (asm-generic/errno-base.h, errno.h; the first
//! name of each number, so EAGAIN not EWOULDBLOCK, EDEADLK not EDEADLOCK) and the
//! kernel-internal codes 512..531 (include/linux/errno.h) that never reach userspace but do
//! come back from kernel functions (ENOTSUPP 524, ERESTARTSYS 512, EPROBE_DEFER 517).
//! [`Errno`] is an error site's constant in the manifest: written as its name, read back only
//! when the name is in the table.

/// (errno, name) for 1..133, ascending; 41 and 58 are unused in Linux.
const USER: &[(u32, &str)] = &[
    (1, "EPERM"),
    (2, "ENOENT"),
    (3, "ESRCH"),
    (4, "EINTR"),
    (5, "EIO"),
    (6, "ENXIO"),
    (7, "E2BIG"),
    (8, "ENOEXEC"),
    (9, "EBADF"),
    (10, "ECHILD"),
    (11, "EAGAIN"),
    (12, "ENOMEM"),
    (13, "EACCES"),
    (14, "EFAULT"),
    (15, "ENOTBLK"),
    (16, "EBUSY"),
    (17, "EEXIST"),
    (18, "EXDEV"),
    (19, "ENODEV"),
    (20, "ENOTDIR"),
    (21, "EISDIR"),
    (22, "EINVAL"),
    (23, "ENFILE"),
    (24, "EMFILE"),
    (25, "ENOTTY"),
    (26, "ETXTBSY"),
    (27, "EFBIG"),
    (28, "ENOSPC"),
    (29, "ESPIPE"),
    (30, "EROFS"),
    (31, "EMLINK"),
    (32, "EPIPE"),
    (33, "EDOM"),
    (34, "ERANGE"),
    (35, "EDEADLK"),
    (36, "ENAMETOOLONG"),
    (37, "ENOLCK"),
    (38, "ENOSYS"),
    (39, "ENOTEMPTY"),
    (40, "ELOOP"),
    (42, "ENOMSG"),
    (43, "EIDRM"),
    (44, "ECHRNG"),
    (45, "EL2NSYNC"),
    (46, "EL3HLT"),
    (47, "EL3RST"),
    (48, "ELNRNG"),
    (49, "EUNATCH"),
    (50, "ENOCSI"),
    (51, "EL2HLT"),
    (52, "EBADE"),
    (53, "EBADR"),
    (54, "EXFULL"),
    (55, "ENOANO"),
    (56, "EBADRQC"),
    (57, "EBADSLT"),
    (59, "EBFONT"),
    (60, "ENOSTR"),
    (61, "ENODATA"),
    (62, "ETIME"),
    (63, "ENOSR"),
    (64, "ENONET"),
    (65, "ENOPKG"),
    (66, "EREMOTE"),
    (67, "ENOLINK"),
    (68, "EADV"),
    (69, "ESRMNT"),
    (70, "ECOMM"),
    (71, "EPROTO"),
    (72, "EMULTIHOP"),
    (73, "EDOTDOT"),
    (74, "EBADMSG"),
    (75, "EOVERFLOW"),
    (76, "ENOTUNIQ"),
    (77, "EBADFD"),
    (78, "EREMCHG"),
    (79, "ELIBACC"),
    (80, "ELIBBAD"),
    (81, "ELIBSCN"),
    (82, "ELIBMAX"),
    (83, "ELIBEXEC"),
    (84, "EILSEQ"),
    (85, "ERESTART"),
    (86, "ESTRPIPE"),
    (87, "EUSERS"),
    (88, "ENOTSOCK"),
    (89, "EDESTADDRREQ"),
    (90, "EMSGSIZE"),
    (91, "EPROTOTYPE"),
    (92, "ENOPROTOOPT"),
    (93, "EPROTONOSUPPORT"),
    (94, "ESOCKTNOSUPPORT"),
    (95, "EOPNOTSUPP"),
    (96, "EPFNOSUPPORT"),
    (97, "EAFNOSUPPORT"),
    (98, "EADDRINUSE"),
    (99, "EADDRNOTAVAIL"),
    (100, "ENETDOWN"),
    (101, "ENETUNREACH"),
    (102, "ENETRESET"),
    (103, "ECONNABORTED"),
    (104, "ECONNRESET"),
    (105, "ENOBUFS"),
    (106, "EISCONN"),
    (107, "ENOTCONN"),
    (108, "ESHUTDOWN"),
    (109, "ETOOMANYREFS"),
    (110, "ETIMEDOUT"),
    (111, "ECONNREFUSED"),
    (112, "EHOSTDOWN"),
    (113, "EHOSTUNREACH"),
    (114, "EALREADY"),
    (115, "EINPROGRESS"),
    (116, "ESTALE"),
    (117, "EUCLEAN"),
    (118, "ENOTNAM"),
    (119, "ENAVAIL"),
    (120, "EISNAM"),
    (121, "EREMOTEIO"),
    (122, "EDQUOT"),
    (123, "ENOMEDIUM"),
    (124, "EMEDIUMTYPE"),
    (125, "ECANCELED"),
    (126, "ENOKEY"),
    (127, "EKEYEXPIRED"),
    (128, "EKEYREVOKED"),
    (129, "EKEYREJECTED"),
    (130, "EOWNERDEAD"),
    (131, "ENOTRECOVERABLE"),
    (132, "ERFKILL"),
    (133, "EHWPOISON"),
];

/// (errno, name) of the kernel-internal codes, ascending (520 is unused).
const INTERNAL: &[(u32, &str)] = &[
    (512, "ERESTARTSYS"),
    (513, "ERESTARTNOINTR"),
    (514, "ERESTARTNOHAND"),
    (515, "ENOIOCTLCMD"),
    (516, "ERESTART_RESTARTBLOCK"),
    (517, "EPROBE_DEFER"),
    (518, "EOPENSTALE"),
    (519, "ENOPARAM"),
    (521, "EBADHANDLE"),
    (522, "ENOTSYNC"),
    (523, "EBADCOOKIE"),
    (524, "ENOTSUPP"),
    (525, "ETOOSMALL"),
    (526, "ESERVERFAULT"),
    (527, "EBADTYPE"),
    (528, "EJUKEBOX"),
    (529, "EIOCBQUEUED"),
    (530, "ERECALLCONFLICT"),
    (531, "ENOGRACE"),
];

/// Name of a positive errno; `None` for 0 and numbers without one.
pub fn errno_name(err: u32) -> Option<&'static str> {
    let table = if err >= 512 { INTERNAL } else { USER };
    table
        .binary_search_by_key(&err, |&(n, _)| n)
        .ok()
        .map(|i| table[i].1)
}

/// The number of an errno name (`EINVAL` -> 22), also the aliases the kernel spells
/// (`EWOULDBLOCK`, `EDEADLOCK`, `ENOTSUP`... map to their first name's number).
pub fn errno_number(name: &str) -> Option<u32> {
    let alias = match name {
        "EWOULDBLOCK" => Some(11),
        "EDEADLOCK" => Some(35),
        _ => None,
    };
    alias.or_else(|| {
        USER.iter()
            .chain(INTERNAL)
            .find(|&&(_, n)| n == name)
            .map(|&(e, _)| e)
    })
}

/// An errno constant, written in the manifest as its name (`EINVAL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Errno(u32);

impl Errno {
    /// The errno a name denotes; `None` for a name the table does not have.
    pub fn from_name(name: &str) -> Option<Errno> {
        errno_number(name).map(Errno)
    }

    /// The positive number (22 for EINVAL).
    pub fn number(self) -> u32 {
        self.0
    }

    pub fn name(self) -> &'static str {
        errno_name(self.0).unwrap_or("E?")
    }
}

impl std::fmt::Display for Errno {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl serde::Serialize for Errno {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Errno {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <String as serde::Deserialize>::deserialize(d)?;
        Errno::from_name(&s).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "errno `{s}`: expected an errno name (EINVAL, ENOMEM, ...)"
            ))
        })
    }
}

impl schemars::JsonSchema for Errno {
    fn schema_name() -> String {
        "Errno".to_string()
    }

    fn json_schema(_: &mut schemars::gen::SchemaGenerator) -> schemars::schema::Schema {
        use schemars::schema::{InstanceType, SchemaObject};
        let names = USER
            .iter()
            .chain(INTERNAL)
            .map(|&(_, n)| serde_json::Value::from(n));
        SchemaObject {
            instance_type: Some(InstanceType::String.into()),
            enum_values: Some(names.collect()),
            ..SchemaObject::default()
        }
        .into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(errno_name(1), Some("EPERM"));
        assert_eq!(errno_name(11), Some("EAGAIN"));
        assert_eq!(errno_name(14), Some("EFAULT"));
        assert_eq!(errno_name(22), Some("EINVAL"));
        assert_eq!(errno_name(95), Some("EOPNOTSUPP"));
        assert_eq!(errno_name(133), Some("EHWPOISON"));
        assert_eq!(errno_name(524), Some("ENOTSUPP"));
        assert_eq!(errno_name(512), Some("ERESTARTSYS"));
        assert_eq!(errno_name(0), None);
        assert_eq!(errno_name(41), None);
        assert_eq!(errno_name(134), None);
        assert_eq!(errno_name(520), None);
    }

    #[test]
    fn tables_sorted_and_complete() {
        for t in [USER, INTERNAL] {
            assert!(t.windows(2).all(|w| w[0].0 < w[1].0));
        }
        // every number 1..=133 but the two unused ones has a name
        let named = (1..=133).filter(|&n| errno_name(n).is_some()).count();
        assert_eq!(named, 131);
    }

    #[test]
    fn errno_round_trips_by_name_and_refuses_unknown_names() {
        let e: Errno = serde_yaml::from_str("EINVAL").expect("known");
        assert_eq!(e.number(), 22);
        assert_eq!(serde_yaml::to_string(&e).ok().as_deref(), Some("EINVAL\n"));
        assert_eq!(Errno::from_name("EWOULDBLOCK").map(Errno::number), Some(11));
        let bad = serde_yaml::from_str::<Errno>("EBOGUS").expect_err("unknown");
        assert!(bad.to_string().contains("errno `EBOGUS`"), "{bad}");
    }
}
