//! The engine's unit of work: one flow, an RDMA WRITE from host to host.

/// One flow to run: an RDMA WRITE (with immediate) of `size` bytes from `src` to `dst`.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowSpec {
    pub src: u32,
    pub dst: u32,
    pub size: u64,
    /// Start time in picoseconds (for a dependent flow: the delay after its trigger).
    pub start_ps: u64,
    /// Start only after this flow (an index into the same list) has been received.
    pub after: Option<u32>,
}
