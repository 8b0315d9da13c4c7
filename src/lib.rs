//! corewire facade
