//! `WorkCompletion`: a safe copy of one `ibv_wc`.

use crate::sys;

/// Outcome of a work request (`ibv_wc_status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WcStatus {
    /// The request completed.
    #[default]
    Success,
    /// A local length error (a receive buffer too small for the message).
    LocalLengthError,
    /// An internal queue pair consistency error.
    LocalQpOperationError,
    /// A scatter/gather entry outside a memory region, or without the access it needs.
    LocalProtectionError,
    /// The QP went to the error state (disconnect, `set_error`, a failed peer) and this
    /// request was flushed without being executed.
    WrFlushError,
    /// A memory window bind failed.
    MemoryWindowBindError,
    /// The peer's response was of an unexpected transport opcode.
    BadResponseError,
    /// A protection error on the local data buffer of an incoming RDMA operation.
    LocalAccessError,
    /// The peer found the request invalid (a message too long for its receive buffer, ...).
    RemoteInvalidRequestError,
    /// The peer refused an RDMA READ or WRITE (bad rkey or range).
    RemoteAccessError,
    /// The peer could not complete the operation.
    RemoteOperationError,
    /// Transport retries ran out: the peer never acknowledged (dead, or cut off).
    RetryExceeded,
    /// Receiver-not-ready retries ran out: the peer had no receive posted.
    RnrRetryExceeded,
    /// The peer aborted the operation.
    RemoteAbortError,
    /// A fatal device error.
    FatalError,
    /// The response timed out.
    ResponseTimeoutError,
    /// A general error, with no more precise status.
    GeneralError,
    /// A status this crate does not know (its raw value).
    Other(u32),
}

impl WcStatus {
    /// The status of a raw `ibv_wc_status` value.
    pub fn from_raw(raw: u32) -> Self {
        use sys::ibv_wc_status::*;
        match raw {
            IBV_WC_SUCCESS => WcStatus::Success,
            IBV_WC_LOC_LEN_ERR => WcStatus::LocalLengthError,
            IBV_WC_LOC_QP_OP_ERR => WcStatus::LocalQpOperationError,
            IBV_WC_LOC_PROT_ERR => WcStatus::LocalProtectionError,
            IBV_WC_WR_FLUSH_ERR => WcStatus::WrFlushError,
            IBV_WC_MW_BIND_ERR => WcStatus::MemoryWindowBindError,
            IBV_WC_BAD_RESP_ERR => WcStatus::BadResponseError,
            IBV_WC_LOC_ACCESS_ERR => WcStatus::LocalAccessError,
            IBV_WC_REM_INV_REQ_ERR => WcStatus::RemoteInvalidRequestError,
            IBV_WC_REM_ACCESS_ERR => WcStatus::RemoteAccessError,
            IBV_WC_REM_OP_ERR => WcStatus::RemoteOperationError,
            IBV_WC_RETRY_EXC_ERR => WcStatus::RetryExceeded,
            IBV_WC_RNR_RETRY_EXC_ERR => WcStatus::RnrRetryExceeded,
            IBV_WC_REM_ABORT_ERR => WcStatus::RemoteAbortError,
            IBV_WC_FATAL_ERR => WcStatus::FatalError,
            IBV_WC_RESP_TIMEOUT_ERR => WcStatus::ResponseTimeoutError,
            IBV_WC_GENERAL_ERR => WcStatus::GeneralError,
            other => WcStatus::Other(other),
        }
    }

    /// Whether the request completed.
    pub fn is_success(self) -> bool {
        self == WcStatus::Success
    }
}

/// What the completed request was (`ibv_wc_opcode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum WcOpcode {
    /// A send.
    Send,
    /// An RDMA WRITE.
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// An atomic compare-and-swap.
    CompareSwap,
    /// An atomic fetch-and-add.
    FetchAdd,
    /// A memory window bind.
    BindMw,
    /// A local invalidate.
    LocalInvalidate,
    /// A receive.
    Recv,
    /// A receive of an RDMA WRITE with immediate data.
    RecvRdmaWithImm,
    /// The provider leaves the opcode undefined in error completions; use `wr_id`.
    #[default]
    Unspecified,
    /// An opcode this crate does not know (its raw value).
    Other(u32),
}

impl WcOpcode {
    /// The opcode of a raw `ibv_wc_opcode` value.
    pub fn from_raw(raw: u32) -> Self {
        use sys::ibv_wc_opcode::*;
        match raw {
            IBV_WC_SEND => WcOpcode::Send,
            IBV_WC_RDMA_WRITE => WcOpcode::RdmaWrite,
            IBV_WC_RDMA_READ => WcOpcode::RdmaRead,
            IBV_WC_COMP_SWAP => WcOpcode::CompareSwap,
            IBV_WC_FETCH_ADD => WcOpcode::FetchAdd,
            IBV_WC_BIND_MW => WcOpcode::BindMw,
            IBV_WC_LOCAL_INV => WcOpcode::LocalInvalidate,
            IBV_WC_RECV => WcOpcode::Recv,
            IBV_WC_RECV_RDMA_WITH_IMM => WcOpcode::RecvRdmaWithImm,
            other => WcOpcode::Other(other),
        }
    }
}

/// One completed work request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct WorkCompletion {
    /// The `wr_id` of the work request this completes.
    pub wr_id: u64,
    /// How it ended.
    pub status: WcStatus,
    /// `Unspecified` unless `status` is `Success`.
    pub opcode: WcOpcode,
    /// Bytes received (receive completions).
    pub byte_len: u32,
    /// Immediate data in host byte order, when the sender used SEND_WITH_IMM.
    pub imm_data: Option<u32>,
    /// The number of the queue pair it ran on.
    pub qp_num: u32,
    /// Provider-specific detail for errors.
    pub vendor_err: u32,
}

impl WorkCompletion {
    pub(crate) fn from_raw(wc: &sys::ibv_wc) -> Self {
        let status = WcStatus::from_raw(wc.status);
        let ok = status.is_success();
        let has_imm = ok && wc.wc_flags & sys::ibv_wc_flags::IBV_WC_WITH_IMM != 0;
        WorkCompletion {
            wr_id: wc.wr_id,
            status,
            opcode: if ok {
                WcOpcode::from_raw(wc.opcode)
            } else {
                WcOpcode::Unspecified
            },
            byte_len: wc.byte_len,
            // SAFETY: both union members are u32-sized integers; IBV_WC_WITH_IMM says
            // imm_data is the valid one. It arrives in network byte order.
            imm_data: has_imm.then(|| u32::from_be(unsafe { wc.__bindgen_anon_1.imm_data })),
            qp_num: wc.qp_num,
            vendor_err: wc.vendor_err,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(status: u32, opcode: u32, flags: u32, imm_be: u32) -> sys::ibv_wc {
        let mut wc = sys::ibv_wc {
            wr_id: 42,
            status,
            opcode,
            wc_flags: flags,
            byte_len: 5,
            qp_num: 7,
            ..Default::default()
        };
        wc.__bindgen_anon_1.imm_data = imm_be;
        wc
    }

    #[test]
    fn receive_with_immediate_converts_to_host_order() {
        let wc = WorkCompletion::from_raw(&raw(
            sys::ibv_wc_status::IBV_WC_SUCCESS,
            sys::ibv_wc_opcode::IBV_WC_RECV,
            sys::ibv_wc_flags::IBV_WC_WITH_IMM,
            0xdead_beefu32.to_be(),
        ));
        assert_eq!(wc.status, WcStatus::Success);
        assert_eq!(wc.opcode, WcOpcode::Recv);
        assert_eq!(wc.imm_data, Some(0xdead_beef));
        assert_eq!((wc.wr_id, wc.byte_len, wc.qp_num), (42, 5, 7));
    }

    #[test]
    fn immediate_is_absent_without_the_flag() {
        let wc = WorkCompletion::from_raw(&raw(
            sys::ibv_wc_status::IBV_WC_SUCCESS,
            sys::ibv_wc_opcode::IBV_WC_SEND,
            0,
            1,
        ));
        assert_eq!(wc.imm_data, None);
        assert_eq!(wc.opcode, WcOpcode::Send);
    }

    #[test]
    fn flushed_completion_has_unspecified_opcode() {
        let wc = WorkCompletion::from_raw(&raw(
            sys::ibv_wc_status::IBV_WC_WR_FLUSH_ERR,
            sys::ibv_wc_opcode::IBV_WC_RECV,
            sys::ibv_wc_flags::IBV_WC_WITH_IMM,
            1,
        ));
        assert_eq!(wc.status, WcStatus::WrFlushError);
        assert_eq!(wc.opcode, WcOpcode::Unspecified);
        assert_eq!(wc.imm_data, None);
    }

    #[test]
    fn unknown_values_are_kept() {
        assert_eq!(WcStatus::from_raw(999), WcStatus::Other(999));
        assert_eq!(WcOpcode::from_raw(999), WcOpcode::Other(999));
    }
}
