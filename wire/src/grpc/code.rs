//! gRPC status codes, one to one with [`Status`]'s codes.

use std::fmt;

use crate::frame::StatusCode;
use crate::rpc::Status;

/// A gRPC status code (the `grpc-status` trailer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
#[allow(missing_docs)] // gRPC's own names
#[non_exhaustive]
pub enum Code {
    Ok = 0,
    Cancelled = 1,
    Unknown = 2,
    InvalidArgument = 3,
    DeadlineExceeded = 4,
    NotFound = 5,
    AlreadyExists = 6,
    PermissionDenied = 7,
    ResourceExhausted = 8,
    FailedPrecondition = 9,
    Aborted = 10,
    OutOfRange = 11,
    Unimplemented = 12,
    Internal = 13,
    Unavailable = 14,
    DataLoss = 15,
    Unauthenticated = 16,
}

impl Code {
    /// Every code, by value.
    pub const ALL: [Code; 17] = [
        Code::Ok,
        Code::Cancelled,
        Code::Unknown,
        Code::InvalidArgument,
        Code::DeadlineExceeded,
        Code::NotFound,
        Code::AlreadyExists,
        Code::PermissionDenied,
        Code::ResourceExhausted,
        Code::FailedPrecondition,
        Code::Aborted,
        Code::OutOfRange,
        Code::Unimplemented,
        Code::Internal,
        Code::Unavailable,
        Code::DataLoss,
        Code::Unauthenticated,
    ];

    /// The code's number.
    pub fn value(self) -> u8 {
        self as u8
    }

    /// The code of a `grpc-status` value; `None` past 16 (a client treats those as Unknown).
    pub fn from_value(value: u32) -> Option<Code> {
        Code::ALL.get(usize::try_from(value).ok()?).copied()
    }

    /// The `grpc-status` header value.
    pub fn as_header_value(self) -> &'static str {
        const VALUES: [&str; 17] = [
            "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "10", "11", "12", "13", "14", "15",
            "16",
        ];
        VALUES[usize::from(self.value())]
    }

    /// gRPC's name of the code (`DEADLINE_EXCEEDED`), the label metrics carry.
    pub fn name(self) -> &'static str {
        match self {
            Code::Ok => "OK",
            Code::Cancelled => "CANCELLED",
            Code::Unknown => "UNKNOWN",
            Code::InvalidArgument => "INVALID_ARGUMENT",
            Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
            Code::NotFound => "NOT_FOUND",
            Code::AlreadyExists => "ALREADY_EXISTS",
            Code::PermissionDenied => "PERMISSION_DENIED",
            Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
            Code::FailedPrecondition => "FAILED_PRECONDITION",
            Code::Aborted => "ABORTED",
            Code::OutOfRange => "OUT_OF_RANGE",
            Code::Unimplemented => "UNIMPLEMENTED",
            Code::Internal => "INTERNAL",
            Code::Unavailable => "UNAVAILABLE",
            Code::DataLoss => "DATA_LOSS",
            Code::Unauthenticated => "UNAUTHENTICATED",
        }
    }

    /// The gRPC code of a corewire wire status. One to one, except that an unknown service,
    /// an unknown method and an unimplemented one are all gRPC's `UNIMPLEMENTED`, and `Ok`
    /// is `OK`.
    pub fn from_status_code(code: StatusCode) -> Code {
        match code {
            StatusCode::Ok => Code::Ok,
            StatusCode::Cancelled => Code::Cancelled,
            StatusCode::Failed => Code::Unknown,
            StatusCode::BadRequest => Code::InvalidArgument,
            StatusCode::DeadlineExceeded => Code::DeadlineExceeded,
            StatusCode::NotFound => Code::NotFound,
            StatusCode::AlreadyExists => Code::AlreadyExists,
            StatusCode::PermissionDenied => Code::PermissionDenied,
            StatusCode::Overloaded => Code::ResourceExhausted,
            StatusCode::FailedPrecondition => Code::FailedPrecondition,
            StatusCode::Aborted => Code::Aborted,
            StatusCode::OutOfRange => Code::OutOfRange,
            StatusCode::UnknownService | StatusCode::UnknownMethod | StatusCode::Unimplemented => {
                Code::Unimplemented
            }
            StatusCode::Internal => Code::Internal,
            StatusCode::Unavailable => Code::Unavailable,
            StatusCode::DataLoss => Code::DataLoss,
            StatusCode::Unauthenticated => Code::Unauthenticated,
        }
    }

    /// The code a failed call travels with over gRPC.
    pub fn of(status: &Status) -> Code {
        Code::from_status_code(status.code())
    }

    /// The message a failed call travels with over gRPC: the service's own text where the
    /// status carries one, else the status's description ("deadline exceeded").
    pub fn message_of(status: &Status) -> String {
        match status.detail() {
            Some(text) => text.to_owned(),
            None => status.to_string(),
        }
    }

    /// The corewire status of a failed gRPC call (`None` for `OK`), its message kept.
    /// `UNIMPLEMENTED` comes back as [`Status::Unimplemented`].
    pub fn to_status(self, message: String) -> Option<Status> {
        Some(match self {
            Code::Ok => return None,
            Code::Cancelled => Status::Cancelled,
            Code::Unknown => Status::Failed(message),
            Code::InvalidArgument => Status::BadRequest(message),
            Code::DeadlineExceeded => Status::DeadlineExceeded,
            Code::NotFound => Status::NotFound(message),
            Code::AlreadyExists => Status::AlreadyExists(message),
            Code::PermissionDenied => Status::PermissionDenied(message),
            Code::ResourceExhausted => Status::Overloaded,
            Code::FailedPrecondition => Status::FailedPrecondition(message),
            Code::Aborted => Status::Aborted(message),
            Code::OutOfRange => Status::OutOfRange(message),
            Code::Unimplemented => Status::Unimplemented(message),
            Code::Internal => Status::Internal(message),
            Code::Unavailable => Status::Unavailable(message),
            Code::DataLoss => Status::DataLoss(message),
            Code::Unauthenticated => Status::Unauthenticated(message),
        })
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_grpc_code_maps_to_one_status_and_back() {
        for code in Code::ALL {
            assert_eq!(Code::from_value(u32::from(code.value())), Some(code));
            assert_eq!(code.as_header_value(), code.value().to_string());
            let Some(status) = code.to_status("why".into()) else {
                assert_eq!(code, Code::Ok);
                continue;
            };
            assert_eq!(Code::of(&status), code, "{status:?}");
            // The service's message survives the trip where the status carries one.
            if let Some(detail) = status.detail() {
                assert_eq!(detail, "why");
                assert_eq!(Code::message_of(&status), "why");
            }
        }
        assert_eq!(Code::from_value(17), None);
    }

    #[test]
    fn every_status_code_has_a_grpc_code() {
        for value in 0..=u8::MAX {
            let Some(code) = StatusCode::ALL.get(usize::from(value)) else {
                break;
            };
            let grpc = Code::from_status_code(*code);
            // Back through gRPC, every code but the three UNIMPLEMENTED ones comes home.
            let back = grpc.to_status(String::new()).map(|s| s.code());
            match code {
                StatusCode::Ok => assert_eq!(back, None),
                StatusCode::UnknownService | StatusCode::UnknownMethod => {
                    assert_eq!(back, Some(StatusCode::Unimplemented))
                }
                _ => assert_eq!(back, Some(*code)),
            }
        }
        assert_eq!(Code::of(&Status::Overloaded), Code::ResourceExhausted);
        assert_eq!(Code::of(&Status::UnknownService(7)), Code::Unimplemented);
        assert_eq!(
            Code::message_of(&Status::DeadlineExceeded),
            "deadline exceeded"
        );
    }
}
