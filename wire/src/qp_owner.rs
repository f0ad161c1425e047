//! Who gets the ticket for a QP's death: the owner of a data-plane record from its status
//! (the completion status or the asynchronous event the kernel saw), with why. A data-plane
//! record is not a chain of calls, so the error sites say nothing about it; the status does.
//!
//! | status                                                   | owner             | why |
//! |----------------------------------------------------------|-------------------|-----|
//! | `IB_WC_RETRY_EXC_ERR`                                    | `network`         | no ACK from the peer within the retries: a link, a switch, or the peer host (if the peer host died, its agent stops reporting: the fleet question `qp_peer_pairs.sql` tells them apart) |
//! | `IB_EVENT_PORT_ERR`, `IB_EVENT_PATH_MIG_ERR`              | `network`         | the port's link went down / the alternate path failed |
//! | `IB_WC_RNR_RETRY_EXC_ERR`                                | `application`     | the peer posted no receive in time (the job's receive-queue sizing or pacing) |
//! | `IB_WC_REM_ACCESS_ERR`, `IB_WC_LOC_PROT_ERR`, `IB_WC_LOC_ACCESS_ERR`, `IB_WC_REM_INV_REQ_ERR`, `IB_WC_LOC_LEN_ERR`, `IB_WC_REM_INV_RD_REQ_ERR`, `IB_WC_MW_BIND_ERR`, `IB_WC_LOC_QP_OP_ERR`, `IB_EVENT_QP_REQ_ERR`, `IB_EVENT_QP_ACCESS_ERR` | `application` | a key, a length, a permission or an operation the job got wrong (its own or its peer's work request) |
//! | `IB_EVENT_CQ_ERR`                                         | `application`     | a CQ overflowed: sized smaller than the completions the job keeps outstanding |
//! | `IB_WC_FATAL_ERR`, `IB_EVENT_DEVICE_FATAL`, `IB_EVENT_QP_FATAL`, `IB_EVENT_SRQ_ERR`, `IB_EVENT_WQ_FATAL`, `IB_WC_GENERAL_ERR`, `IB_WC_BAD_RESP_ERR` | `device-firmware` | the device reported the object or itself broken |
//! | `IB_WC_WR_FLUSH_ERR`, `IB_QPS_ERR`, any other            | none              | the QP was already dead: its first error (or the completion beside it) is the record that names the owner |

use crate::owner::Owner;

/// The owner of a data-plane record whose status (or event) is `status`, and why; `None`
/// where the record only follows the QP's first error (flush, the error state itself).
pub fn qp_owner(status: &str) -> Option<(Owner, &'static str)> {
    Some(match status {
        "IB_WC_RETRY_EXC_ERR" => (
            Owner::Network,
            "no ACK from the peer within the transport retries: a link, a switch or the peer host",
        ),
        "IB_EVENT_PORT_ERR" => (Owner::Network, "the port's link went down"),
        "IB_EVENT_PATH_MIG_ERR" => (Owner::Network, "the alternate path failed"),
        "IB_WC_RNR_RETRY_EXC_ERR" => (
            Owner::Application,
            "the peer posted no receive within the RNR retries",
        ),
        "IB_WC_REM_ACCESS_ERR"
        | "IB_WC_LOC_PROT_ERR"
        | "IB_WC_LOC_ACCESS_ERR"
        | "IB_EVENT_QP_ACCESS_ERR"
        | "IB_WC_MW_BIND_ERR" => (
            Owner::Application,
            "a memory key or its access rights do not cover the request",
        ),
        "IB_WC_REM_INV_REQ_ERR"
        | "IB_WC_LOC_LEN_ERR"
        | "IB_WC_REM_INV_RD_REQ_ERR"
        | "IB_WC_LOC_QP_OP_ERR"
        | "IB_EVENT_QP_REQ_ERR"
        | "IB_WC_REM_OP_ERR" => (
            Owner::Application,
            "a work request the QP or its peer cannot carry out (length, opcode, state)",
        ),
        "IB_EVENT_CQ_ERR" => (
            Owner::Application,
            "a CQ overflowed: smaller than the completions the job keeps outstanding",
        ),
        "IB_WC_FATAL_ERR"
        | "IB_EVENT_DEVICE_FATAL"
        | "IB_EVENT_QP_FATAL"
        | "IB_EVENT_SRQ_ERR"
        | "IB_EVENT_WQ_FATAL"
        | "IB_WC_GENERAL_ERR"
        | "IB_WC_BAD_RESP_ERR" => (
            Owner::DeviceFirmware,
            "the device reported the object or itself broken",
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_induced_classes_go_where_the_table_says() {
        let owner = |s| qp_owner(s).map(|(o, _)| o);
        assert_eq!(owner("IB_WC_RETRY_EXC_ERR"), Some(Owner::Network));
        assert_eq!(owner("IB_EVENT_PORT_ERR"), Some(Owner::Network));
        assert_eq!(owner("IB_WC_RNR_RETRY_EXC_ERR"), Some(Owner::Application));
        assert_eq!(owner("IB_WC_REM_ACCESS_ERR"), Some(Owner::Application));
        assert_eq!(owner("IB_EVENT_CQ_ERR"), Some(Owner::Application));
        assert_eq!(owner("IB_EVENT_DEVICE_FATAL"), Some(Owner::DeviceFirmware));
        // a dead QP's flush and its error state follow the first error
        assert_eq!(owner("IB_WC_WR_FLUSH_ERR"), None);
        assert_eq!(owner("IB_QPS_ERR"), None);
        assert_eq!(owner("other (22)"), None);
    }

    #[test]
    fn every_status_of_the_rules_is_decided_or_follows() {
        // the rules' lists (heuristics/rules.yaml): each status has a row, none by accident
        let rules = include_str!("../../heuristics/rules.yaml");
        let follows = [
            "IB_WC_WR_FLUSH_ERR",
            "IB_WC_LOC_EEC_OP_ERR",
            "IB_WC_LOC_RDD_VIOL_ERR",
            "IB_WC_REM_ABORT_ERR",
            "IB_WC_INV_EECN_ERR",
            "IB_WC_INV_EEC_STATE_ERR",
            "IB_WC_RESP_TIMEOUT_ERR",
        ];
        let names: Vec<&str> = rules
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.starts_with("IB_WC_") || w.starts_with("IB_EVENT_"))
            .collect();
        assert!(names.len() > 20, "{names:?}");
        for n in names {
            if n == "IB_WC_SUCCESS" {
                continue;
            }
            assert!(
                qp_owner(n).is_some() || follows.contains(&n),
                "{n}: no owner row and not listed as following the first error"
            );
        }
    }
}
