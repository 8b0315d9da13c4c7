//! corewire's sans-I/O wire layer: framing codecs and RPC session state as plain
//! state machines over bytes. Nothing here touches sockets, clocks or a runtime.

pub mod frame;
pub mod length_prefixed;
pub mod rpc;
