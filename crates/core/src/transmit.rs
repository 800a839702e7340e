//! [`Transmit`]: what every rocast state machine's `poll_transmit(now, buf)` returns —
//! the one output convention of the core (ARCHITECTURE.md, "The one rule that keeps the
//! house livable"). The driver owns the buffer; the state machine writes one packet
//! into its front and says how long it is, which port it leaves by, and, where the
//! machine cannot say it in the packet's own header, where it goes.

/// One packet a state machine wrote into the driver's buffer: `buf[..len]`, to send out
/// of `port` (0 for a machine with one port, as every end host's is), to `dest` (`()`
/// when the packet's own header says where it goes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit<D = ()> {
    pub port: u16,
    pub len: usize,
    pub dest: D,
}

impl Transmit {
    /// `len` bytes out of the only port, addressed by their own header.
    pub fn one(len: usize) -> Self {
        Transmit {
            port: 0,
            len,
            dest: (),
        }
    }
}

impl<D> Transmit<D> {
    /// `len` bytes out of the only port, to `dest`.
    pub fn to(len: usize, dest: D) -> Self {
        Transmit { port: 0, len, dest }
    }
}
