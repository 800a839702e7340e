//! `control`: Cepheus' control plane, the only part of rocast that talks MRP or
//! decides, at run time, how a group is carried (ARCHITECTURE.md, "Boundaries").
//!
//! It owns a group's lifecycle around the data plane that `rnic` (end hosts) and
//! `fabric` (switches) implement:
//! - [`registration`]: MFT registration (Cepheus §III-C). The leader host's
//!   [`RegistrationController`] sends the members to the McstID in MRP packets
//!   ([`crate::wire::mrp`]), the [`MemberAgent`] on each host answers with a
//!   [`Confirmation`] over the out-of-band channel, and the controller ends in exactly
//!   one outcome: registered, or failed (switch rejection or timeout), never a hang.
//! - [`source`]: multicast source switching (Cepheus §III-E), the PSN synchronisation
//!   that lets another member send on the same MFT and QPs.
//! - [`safeguard`]: the fallback to application-layer multicast (Cepheus §V-D) when
//!   registration failed or throughput stays below a fraction of the expected rate.
//! - [`session`]: one group's whole control lifecycle, [`LeaderSession`] and
//!   [`MemberSession`]: discovery, registration (wrapping the two above), the fallback
//!   to an overlay, each buffer's announcement and verdicts, and the close that carries
//!   the outcome seen by all (RDMC).
//!
//! A switch's side of MRP lives with the switch (`switch::mrp_agent`): `control`
//! decides for end hosts and never imports the switch, so the two cannot form a cycle.
//!
//! Everything here is a sans-IO state machine or a pure function: the driver passes
//! `now`, carries MRP packets and confirmations, and acts on events. Nothing reads a
//! clock, opens a socket, or knows whether it runs in the simulator.

pub mod invitation;
pub mod registration;
pub mod safeguard;
pub mod session;
pub mod source;

pub use registration::{
    Confirmation, GroupError, GroupSpec, MemberAgent, MemberAgentStats, RegistrationConfig,
    RegistrationController, RegistrationEvent, RegistrationFailure, RegistrationPhase,
    RegistrationStats, SwitchRejection, SwitchReport, CONFIRMATION_LEN,
};
pub use safeguard::{FallbackReason, SafeguardConfig, SafeguardConfigError, SafeguardMonitor};
pub use session::{
    ConnId, LeaderEvent, LeaderSession, LeaderSessionConfig, MemberSession, MemberSessionConfig,
    SessionDest, SessionError,
};
pub use source::{
    plan_source_switch, synchronise_source_switch, PsnSync, QpPsns, SourceSwitchError,
};
