//! `rocast switch --fast-path`: a group's new data replicated in the kernel.
//!
//! What runs where:
//! - The core compiles a group's tree at this switch ([`FastPathGroup`], Cepheus
//!   §III-B) and says, in its model [`FastPathGroup::forward`], what a fast path does
//!   with a frame. This module writes the compiled group into a BPF array that it
//!   maps into the daemon, and generates two kernel programs per port from the same
//!   checks ([`program`]), so the kernel does what the model does:
//!   - a **socket filter** on the daemon's `AF_PACKET` socket (it runs first, as a tap)
//!     keeps the group's next data packet (the PSN right after the highest forwarded)
//!     from the daemon, and suspends the group when a frame of the group's source is
//!     anything else (a retransmission, or a PSN further ahead while earlier ones are
//!     still with the daemon), so that from then on the daemon sees every frame in
//!     order and the kernel never overtakes it;
//!   - a **tc ingress program** (a tcx link, gone when the daemon exits) makes the
//!     copies: per copy it writes the Ethernet, IPv4 and BTH (and RETH) fields and the
//!     ICRC, updated incrementally from table lookups and a carry-less multiply, and
//!     `bpf_clone_redirect`s the frame to the copy's port; the last copy is redirected.
//! - The daemon keeps everything else: feedback aggregation, CNPs, MRP, leases and
//!   the retransmissions, which it filters by each path's AckPSN as before. It
//!   (re)arms a group when it forwards the group's new data itself with its socket
//!   drained, and re-compiles armed groups when the tables change.
//!
//! Memory: the group array is `MAX_GROUPS` × 1,080 B (69 KB); the ICRC tables 51 KB;
//! per port a classifier of 13,882 instructions (111 KB, mostly the unrolled
//! carry-less multiplies) and a filter of 168.
//!
//! Limits: groups of at most [`FAST_PATH_MAX_COPIES`] copies, frames of at most
//! [`FAST_PATH_MAX_IP_LEN`] IP bytes; AF_PACKET ports without shaping, loss or capture
//! (those live in the daemon). Needs Linux 6.6+ (tcx) and CAP_BPF / CAP_NET_ADMIN.

use crate::bpf::{self, helper, Alu, Asm, AsmError, Insn, Jmp, Map, MappedArray, Program, Size};
use crate::bpf::{FP, R0, R1, R2, R3, R4, R5, R6, R7, R8, R9};
use rocast_core::switch::fast_path::{
    data_opcode, icrc_table_entry, FastPathGroup, FAST_PATH_MAX_COPIES, FAST_PATH_MAX_IP_LEN,
    MIN_IP_LEN,
};
use rocast_core::wire::icrc;
use rocast_core::wire::{Ipv4Address, Psn, IP_PROTO_UDP, ROCEV2_UDP_PORT};
use std::collections::BTreeMap;
use std::io;
use std::os::fd::{OwnedFd, RawFd};

/// Groups the fast path holds at once (more stay with the daemon).
pub const MAX_GROUPS: usize = 64;

// The group slot (little-endian, 8-aligned), shared by the programs and the daemon.
const S_STATE: usize = 0;
const S_IN_IFINDEX: usize = 4;
const S_SRC_IP: usize = 8;
const S_QP: usize = 12;
const S_HIGH: usize = 16;
const S_FRAMES: usize = 24;
const S_COPIES: usize = 32;
const S_DEFERRED: usize = 40;
const S_N: usize = 48;
const S_MEMBERS: usize = 56;
const M_SIZE: usize = 64;
const M_IFINDEX: usize = 0;
const M_KIND: usize = 4;
const M_ETH: usize = 8;
const M_SRC: usize = 20;
const M_DST: usize = 24;
const M_IPSUM: usize = 28;
const M_QP: usize = 32;
const M_CRC: usize = 36;
const M_CACHE: usize = 40;
const M_VA: usize = 48;
const M_RKEY: usize = 56;
const M_HAS_REGION: usize = 60;
const SLOT_SIZE: usize = S_MEMBERS + FAST_PATH_MAX_COPIES * M_SIZE;

/// Slot states.
const OFF: u32 = 0;
const ARMED: u32 = 1;
const SUSPENDED: u32 = 2;

// The ICRC tables: 14 × 256 window entries, then `x^(8Z) mod P` for Z = IP length − 40.
const T_ENTRIES: usize = 14 * 256;
const OPS: usize = FAST_PATH_MAX_IP_LEN;
const TABLES_SIZE: usize = 4 * (T_ENTRIES + OPS);

// The stack frame. The header copy starts 2 bytes off 8 so that the IPv4 header and
// the RETH are aligned (the verifier wants aligned stack access).
const HDR: i16 = -86;
const HDR_LEN: i32 = 54;
const HDR_RETH_LEN: i32 = 66;
const TAIL: i16 = -16;
const NEW_ICRC: i16 = -20;
const KEY: i16 = -4;
const DELTA: i16 = -8;
const SI: i16 = -96;
const OP_Z: i16 = -104;
const PSUM: i16 = -112;
const ORIG_VA: i16 = -120;
const ORIG_RKEY: i16 = -128;
const ORIG_ICRC: i16 = -136;
const Z1: i16 = -144;
const HAS_RETH: i16 = -152;
const TABLES_PTR: i16 = -160;
const OP_Z16: i16 = -168;
const PAD: i16 = -176;
const VA_DIFF: i16 = -184;

/// Frame offset `f` in the header copy.
const fn h(f: i16) -> i16 {
    HDR + f
}

/// Which of the two programs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Variant {
    SocketFilter,
    Classifier,
}

/// The maps the programs use.
pub struct Maps {
    /// Group address (as the packet holds it) → slot.
    pub index: Map,
    pub slots: MappedArray,
    pub tables: Map,
}

/// `r0 = a * b mod P` (zlib's `multmodp`, unrolled) for `a` in r1 and `b` in r2;
/// clobbers r2 and r3.
fn emit_multmodp(a: &mut Asm) {
    a.alu32_imm(Alu::Mov, R0, 0);
    for k in (0..32).rev() {
        let skip = a.label();
        a.mov64(R3, R1);
        a.alu64_imm(Alu::And, R3, (1u32 << k) as i32);
        a.jmp_imm(Jmp::Eq, R3, 0, skip);
        a.alu32_reg(Alu::Xor, R0, R2);
        a.bind(skip);
        let even = a.label();
        a.mov64(R3, R2);
        a.alu64_imm(Alu::And, R3, 1);
        a.alu32_imm(Alu::Rsh, R2, 1);
        a.jmp_imm(Jmp::Eq, R3, 0, even);
        a.alu32_imm(Alu::Xor, R2, icrc::POLY as i32);
        a.bind(even);
    }
}

/// `acc ^= T[slot][byte]` for the byte in r1 (r1 holds any value; its low byte is
/// used); `acc` lives at stack `acc`. Clobbers r0-r2.
fn emit_table_xor(a: &mut Asm, slot: usize, acc: i16) {
    a.alu64_imm(Alu::And, R1, 0xff);
    a.alu64_imm(Alu::Add, R1, (slot * 256) as i32);
    a.alu64_imm(Alu::Lsh, R1, 2);
    a.ldx(Size::DW, R0, FP, TABLES_PTR);
    a.alu64_reg(Alu::Add, R0, R1);
    a.ldx(Size::W, R1, R0, 0);
    a.ldx(Size::W, R2, FP, acc);
    a.alu32_reg(Alu::Xor, R2, R1);
    a.stx(Size::W, FP, acc, R2);
}

/// `r0 = bpf_map_lookup_elem(map, fp + KEY)` for the u32 in r1; null to `none`.
fn emit_lookup(a: &mut Asm, map: RawFd, none: bpf::Label) {
    a.stx(Size::W, FP, KEY, R1);
    a.ld_map_fd(R1, map);
    a.mov64(R2, FP);
    a.alu64_imm(Alu::Add, R2, KEY as i32);
    a.call(helper::MAP_LOOKUP_ELEM);
    a.jmp_imm(Jmp::Eq, R0, 0, none);
}

/// Stores `op[Z]` (`x^(8Z) mod P`, from the tables at r0) at stack `out`, for Z in
/// register `z` (bounded by the caller); clobbers `z` and r3.
fn emit_zeros_op(a: &mut Asm, z: u8, out: i16) {
    a.alu64_imm(Alu::Add, z, T_ENTRIES as i32);
    a.alu64_imm(Alu::Lsh, z, 2);
    a.mov64(R3, R0);
    a.alu64_reg(Alu::Add, R3, z);
    a.ldx(Size::W, R3, R3, 0);
    a.stx(Size::DW, FP, out, R3);
}

/// `bpf_skb_store_bytes(skb, r2, fp + stack, r4, 0)` (r2 and r4 set by the caller);
/// on failure to `shot`.
fn emit_store_bytes(a: &mut Asm, stack: i16, shot: bpf::Label) {
    a.mov64(R1, R6);
    a.mov64(R3, FP);
    a.alu64_imm(Alu::Add, R3, stack as i32);
    a.mov_imm(R5, 0);
    a.call(helper::SKB_STORE_BYTES);
    a.jmp_imm(Jmp::Ne, R0, 0, shot);
}

/// `bpf_skb_load_bytes(skb, r2, fp + stack, len)` (r2 set by the caller); on failure
/// to `fail`.
fn emit_load_bytes(a: &mut Asm, stack: i16, len: i32, fail: bpf::Label) {
    a.mov64(R1, R6);
    a.mov64(R3, FP);
    a.alu64_imm(Alu::Add, R3, stack as i32);
    a.mov_imm(R4, len);
    a.call(helper::SKB_LOAD_BYTES);
    a.jmp_imm(Jmp::Ne, R0, 0, fail);
}

/// Generates the program for the port with `ifindex`.
pub fn program(v: Variant, ifindex: u32, maps: &Maps) -> Result<Vec<Insn>, AsmError> {
    let mut a = Asm::new();
    let keep = a.label();
    let refuse = a.label(); // the group's frame, not fast-path data
    let not_armed = a.label();
    let shot = a.label();

    a.mov64(R6, R1);
    a.ldx(Size::W, R8, R6, 0); // skb->len
    a.jmp_imm(Jmp::Lt, R8, (14 + MIN_IP_LEN) as i32, keep);
    a.jmp_imm(Jmp::Gt, R8, 14 + FAST_PATH_MAX_IP_LEN as i32, keep);
    // The RETH part of the copy is read by the helper whatever the opcode.
    a.st_imm(Size::DW, FP, h(54), 0);
    a.st_imm(Size::W, FP, h(62), 0);
    a.mov_imm(R2, 0);
    emit_load_bytes(&mut a, HDR, HDR_LEN, keep);
    // IPv4 (0x0800, read little-endian).
    a.ldx(Size::H, R1, FP, h(12));
    a.jmp_imm(Jmp::Ne, R1, 0x0008, keep);
    // The group's slot, by destination address.
    a.ldx(Size::W, R1, FP, h(30));
    emit_lookup(&mut a, maps.index.fd(), keep);
    a.ldx(Size::W, R1, R0, 0);
    emit_lookup(&mut a, maps.slots.map.fd(), keep);
    a.mov64(R7, R0);
    // From the group's source side only (feedback from members is the daemon's).
    a.ldx(Size::W, R1, R7, S_IN_IFINDEX as i16);
    a.jmp_imm(Jmp::Ne, R1, ifindex as i32, keep);
    a.ldx(Size::W, R1, R7, S_STATE as i16);
    a.jmp_imm(Jmp::Ne, R1, ARMED as i32, not_armed);

    // The model's checks (`source_data`, then `classify`).
    a.ldx(Size::B, R1, FP, h(14));
    a.jmp_imm(Jmp::Ne, R1, 0x45, refuse);
    a.ldx(Size::B, R1, FP, h(23));
    a.jmp_imm(Jmp::Ne, R1, IP_PROTO_UDP as i32, refuse);
    a.ldx(Size::H, R1, FP, h(20));
    a.alu64_imm(Alu::And, R1, 0xffbf); // only DF may be set
    a.jmp_imm(Jmp::Ne, R1, 0, refuse);
    a.ldx(Size::H, R1, FP, h(36));
    a.jmp_imm(Jmp::Ne, R1, ROCEV2_UDP_PORT.swap_bytes() as i32, refuse);
    a.ldx(Size::H, R2, FP, h(16));
    a.to_be(R2, 16); // total length
    a.mov64(R3, R8);
    a.alu64_imm(Alu::Sub, R3, 14);
    a.jmp_reg(Jmp::Ne, R2, R3, refuse);
    a.ldx(Size::H, R3, FP, h(38));
    a.to_be(R3, 16);
    a.mov64(R4, R2);
    a.alu64_imm(Alu::Sub, R4, 20);
    a.jmp_reg(Jmp::Ne, R3, R4, refuse);
    a.ldx(Size::W, R1, FP, h(26));
    a.ldx(Size::W, R3, R7, S_SRC_IP as i16);
    a.jmp_reg(Jmp::Ne, R1, R3, refuse);
    for k in 0..3 {
        a.ldx(Size::B, R3, FP, h(47 + k));
        a.ldx(Size::B, R4, R7, (S_QP + k as usize) as i16);
        a.jmp_reg(Jmp::Ne, R3, R4, refuse);
    }
    // The opcode: a data opcode (the core's table), giving the minimum length (headers,
    // extended headers, ICRC; the pad is added below) in r3 and the RETH flag in r9.
    a.ldx(Size::B, R1, FP, h(42));
    {
        let known = a.label();
        let mut cases = Vec::new();
        for op in 0..=u8::MAX {
            if let Some(d) = data_opcode(op) {
                let l = a.label();
                a.jmp_imm(Jmp::Eq, R1, op as i32, l);
                cases.push((l, d));
            }
        }
        a.ja(refuse);
        for (l, d) in cases {
            a.bind(l);
            a.mov_imm(R3, (MIN_IP_LEN + d.ext_len) as i32);
            a.mov_imm(R9, d.has_reth as i32);
            a.ja(known);
        }
        a.bind(known);
    }
    a.stx(Size::DW, FP, HAS_RETH, R9);
    a.ldx(Size::B, R4, FP, h(43));
    a.alu64_imm(Alu::Rsh, R4, 4);
    a.alu64_imm(Alu::And, R4, 3); // pad
    a.alu64_reg(Alu::Add, R3, R4);
    a.jmp_reg(Jmp::Lt, R2, R3, refuse);
    a.stx(Size::DW, FP, PAD, R4); // kept across the call below
    a.alu64_imm(Alu::Sub, R2, 40);
    a.alu64_imm(Alu::Add, R2, 1);
    a.stx(Size::DW, FP, Z1, R2); // Z + 1
                                 // The tail: pad bytes and the ICRC.
    a.mov64(R2, R8);
    a.alu64_imm(Alu::Sub, R2, 8);
    emit_load_bytes(&mut a, TAIL, 8, refuse);
    a.ldx(Size::DW, R4, FP, PAD);
    {
        let no_pad = a.label();
        a.jmp_imm(Jmp::Eq, R4, 0, no_pad);
        // mask = 0xffff_ffff << 8 * (4 - pad), over the 4 bytes before the ICRC.
        a.mov_imm(R3, 4);
        a.alu64_reg(Alu::Sub, R3, R4);
        a.alu64_imm(Alu::Lsh, R3, 3);
        a.alu32_imm(Alu::Mov, R5, -1);
        a.alu64_reg(Alu::Lsh, R5, R3);
        a.ldx(Size::W, R1, FP, TAIL);
        a.alu64_reg(Alu::And, R1, R5);
        a.alu32_reg(Alu::Mov, R1, R1);
        a.jmp_imm(Jmp::Ne, R1, 0, refuse);
        a.bind(no_pad);
    }
    // The next: PSN − highest = 1 (mod 2^24).
    a.ldx(Size::B, R1, FP, h(51));
    a.alu64_imm(Alu::Lsh, R1, 16);
    a.ldx(Size::B, R2, FP, h(52));
    a.alu64_imm(Alu::Lsh, R2, 8);
    a.alu64_reg(Alu::Or, R1, R2);
    a.ldx(Size::B, R2, FP, h(53));
    a.alu64_reg(Alu::Or, R1, R2);
    a.ldx(Size::W, R2, R7, S_HIGH as i16);
    a.mov64(R3, R1);
    a.alu64_reg(Alu::Sub, R3, R2);
    a.alu64_imm(Alu::And, R3, 0xff_ffff);
    a.jmp_imm(Jmp::Ne, R3, 1, refuse);

    match v {
        Variant::SocketFilter => {
            // The daemon does not see it.
            a.mov_imm(R0, 0);
            a.exit();
            a.bind(refuse);
            a.st_imm(Size::W, R7, S_STATE as i16, SUSPENDED as i32);
            a.bind(not_armed);
            {
                let off = a.label();
                a.ldx(Size::W, R1, R7, S_STATE as i16);
                a.jmp_imm(Jmp::Eq, R1, OFF as i32, off);
                a.mov_imm(R1, 1);
                a.atomic_add64(R7, S_DEFERRED as i16, R1);
                a.bind(off);
            }
            // (The filter drops nothing itself: `shot` is unused.)
            a.bind(shot);
            a.bind(keep);
            a.alu32_imm(Alu::Mov, R0, -1);
            a.exit();
        }
        Variant::Classifier => {
            emit_replicate(&mut a, shot, maps);
            a.bind(refuse);
            a.bind(not_armed);
            a.bind(keep);
            a.mov_imm(R0, -1); // TCX_NEXT: on up the stack
            a.exit();
            a.bind(shot);
            a.mov_imm(R0, 2); // TC_ACT_SHOT
            a.exit();
        }
    }
    a.finish()
}

/// The copies (the model's `forward`), with the PSN in r1, the slot in r7, the length
/// in r8 and the RETH flag on the stack.
fn emit_replicate(a: &mut Asm, shot: bpf::Label, maps: &Maps) {
    a.stx(Size::W, R7, S_HIGH as i16, R1);
    a.mov_imm(R1, 1);
    a.atomic_add64(R7, S_FRAMES as i16, R1);
    // The RETH, when there is one, joins the header copy.
    {
        let no_reth = a.label();
        a.ldx(Size::DW, R1, FP, HAS_RETH);
        a.jmp_imm(Jmp::Eq, R1, 0, no_reth);
        a.mov_imm(R2, 54);
        emit_load_bytes(a, h(54), 12, shot);
        a.ldx(Size::DW, R1, FP, h(54));
        a.stx(Size::DW, FP, ORIG_VA, R1);
        a.ldx(Size::W, R1, FP, h(62));
        a.stx(Size::DW, FP, ORIG_RKEY, R1);
        a.bind(no_reth);
    }
    // The tables.
    a.mov_imm(R1, 0);
    emit_lookup(a, maps.tables.fd(), shot);
    a.stx(Size::DW, FP, TABLES_PTR, R0);
    // op[Z], and for a RETH op[Z − 16] (its window is 16 bytes longer).
    a.ldx(Size::DW, R1, FP, Z1);
    a.alu64_imm(Alu::Sub, R1, 1);
    a.jmp_imm(Jmp::Ge, R1, OPS as i32, shot);
    a.mov64(R2, R1);
    emit_zeros_op(a, R1, OP_Z);
    // Written either way: the verifier does not know that only RETH copies read it.
    a.st_imm(Size::DW, FP, OP_Z16, 0);
    {
        let no_reth = a.label();
        a.ldx(Size::DW, R1, FP, HAS_RETH);
        a.jmp_imm(Jmp::Eq, R1, 0, no_reth);
        a.jmp_imm(Jmp::Lt, R2, 16, shot);
        a.alu64_imm(Alu::Sub, R2, 16);
        emit_zeros_op(a, R2, OP_Z16);
        a.bind(no_reth);
    }
    // The IP ident's part, shared by every bridged copy.
    a.st_imm(Size::DW, FP, SI, 0);
    a.ldx(Size::B, R1, FP, h(18));
    emit_table_xor(a, 0, SI);
    a.ldx(Size::B, R1, FP, h(19));
    emit_table_xor(a, 1, SI);
    {
        let zero = a.label();
        a.ldx(Size::W, R2, FP, SI);
        a.jmp_imm(Jmp::Eq, R2, 0, zero);
        a.ldx(Size::DW, R1, FP, OP_Z);
        emit_multmodp(a);
        a.stx(Size::DW, FP, SI, R0);
        a.bind(zero);
    }
    a.ldx(Size::W, R1, FP, TAIL + 4);
    a.stx(Size::DW, FP, ORIG_ICRC, R1);
    // The IPv4 header's words the copies keep (version/TOS, length, flags, TTL/protocol).
    a.mov_imm(R1, 0);
    for f in [14, 16, 20, 22] {
        a.ldx(Size::H, R2, FP, h(f));
        a.alu64_reg(Alu::Add, R1, R2);
    }
    a.stx(Size::DW, FP, PSUM, R1);
    a.ldx(Size::W, R9, R7, S_N as i16);
    a.jmp_imm(Jmp::Gt, R9, FAST_PATH_MAX_COPIES as i32, shot);
    for i in 0..FAST_PATH_MAX_COPIES {
        let m = (S_MEMBERS + i * M_SIZE) as i16;
        let bridged = a.label();
        let send = a.label();
        let last = a.label();
        let next = a.label();
        a.jmp_imm(Jmp::Le, R9, i as i32, shot);
        for k in 0..6 {
            a.ldx(Size::H, R1, R7, m + M_ETH as i16 + 2 * k);
            a.stx(Size::H, FP, h(2 * k), R1);
        }
        a.ldx(Size::W, R1, R7, m + M_KIND as i16);
        a.jmp_imm(Jmp::Eq, R1, 0, bridged);
        // Toward a switch: the frame as it came, new MACs.
        a.mov_imm(R2, 0);
        a.mov_imm(R4, 12);
        emit_store_bytes(a, HDR, shot);
        a.ja(send);

        a.bind(bridged);
        a.st_imm(Size::H, FP, h(18), 0);
        a.ldx(Size::W, R1, R7, m + M_SRC as i16);
        a.stx(Size::W, FP, h(26), R1);
        a.ldx(Size::W, R1, R7, m + M_DST as i16);
        a.stx(Size::W, FP, h(30), R1);
        a.ldx(Size::DW, R1, FP, PSUM);
        a.ldx(Size::W, R2, R7, m + M_IPSUM as i16);
        a.alu64_reg(Alu::Add, R1, R2);
        for _ in 0..2 {
            a.mov64(R2, R1);
            a.alu64_imm(Alu::Rsh, R2, 16);
            a.alu64_imm(Alu::And, R1, 0xffff);
            a.alu64_reg(Alu::Add, R1, R2);
        }
        a.alu64_imm(Alu::Xor, R1, 0xffff);
        a.stx(Size::H, FP, h(24), R1);
        for k in 0..3 {
            a.ldx(Size::B, R1, R7, m + (M_QP + k) as i16);
            a.stx(Size::B, FP, h(47 + k as i16), R1);
        }
        // This copy's fixed ICRC change, after the window (cached for the length).
        {
            let hit = a.label();
            let have = a.label();
            a.ldx(Size::DW, R1, R7, m + M_CACHE as i16);
            a.mov64(R2, R1);
            a.alu64_imm(Alu::Rsh, R2, 32);
            a.ldx(Size::DW, R3, FP, Z1);
            a.jmp_reg(Jmp::Eq, R2, R3, hit);
            a.ldx(Size::DW, R1, FP, OP_Z);
            a.ldx(Size::W, R2, R7, m + M_CRC as i16);
            emit_multmodp(a);
            a.ldx(Size::DW, R1, FP, Z1);
            a.alu64_imm(Alu::Lsh, R1, 32);
            a.alu64_reg(Alu::Or, R1, R0);
            a.stx(Size::DW, R7, m + M_CACHE as i16, R1);
            a.ja(have);
            a.bind(hit);
            a.alu32_reg(Alu::Mov, R0, R1);
            a.bind(have);
            a.ldx(Size::DW, R1, FP, SI);
            a.alu32_reg(Alu::Xor, R0, R1);
            a.stx(Size::W, FP, DELTA, R0);
        }
        // A WRITE group's region in the RETH.
        {
            let skip = a.label();
            a.ldx(Size::DW, R1, FP, HAS_RETH);
            a.jmp_imm(Jmp::Eq, R1, 0, skip);
            a.ldx(Size::W, R1, R7, m + M_HAS_REGION as i16);
            a.jmp_imm(Jmp::Eq, R1, 0, skip);
            let acc = NEW_ICRC;
            a.st_imm(Size::W, FP, acc, 0);
            a.ldx(Size::DW, R1, FP, ORIG_VA);
            a.to_be(R1, 64);
            a.ldx(Size::DW, R2, R7, m + M_VA as i16);
            a.alu64_reg(Alu::Add, R1, R2);
            a.to_be(R1, 64);
            a.stx(Size::DW, FP, h(54), R1);
            a.ldx(Size::DW, R2, FP, ORIG_VA);
            a.alu64_reg(Alu::Xor, R1, R2);
            a.stx(Size::DW, FP, VA_DIFF, R1); // VA difference
            for k in 0..8 {
                a.ldx(Size::DW, R1, FP, VA_DIFF);
                a.alu64_imm(Alu::Rsh, R1, 8 * k);
                emit_table_xor(a, 2 + k as usize, acc);
            }
            a.ldx(Size::W, R1, R7, m + M_RKEY as i16);
            a.stx(Size::W, FP, h(62), R1);
            a.ldx(Size::DW, R2, FP, ORIG_RKEY);
            a.alu64_reg(Alu::Xor, R1, R2);
            a.stx(Size::DW, FP, VA_DIFF, R1);
            for k in 0..4 {
                a.ldx(Size::DW, R1, FP, VA_DIFF);
                a.alu64_imm(Alu::Rsh, R1, 8 * k);
                emit_table_xor(a, 10 + k as usize, acc);
            }
            a.ldx(Size::DW, R1, FP, OP_Z16);
            a.ldx(Size::W, R2, FP, acc);
            emit_multmodp(a);
            a.ldx(Size::W, R1, FP, DELTA);
            a.alu32_reg(Alu::Xor, R1, R0);
            a.stx(Size::W, FP, DELTA, R1);
            a.bind(skip);
        }
        a.ldx(Size::DW, R1, FP, ORIG_ICRC);
        a.ldx(Size::W, R2, FP, DELTA);
        a.alu32_reg(Alu::Xor, R1, R2);
        a.stx(Size::W, FP, NEW_ICRC, R1);
        // Write the headers, then the ICRC.
        {
            let short = a.label();
            let go = a.label();
            a.ldx(Size::DW, R1, FP, HAS_RETH);
            a.jmp_imm(Jmp::Eq, R1, 0, short);
            a.mov_imm(R4, HDR_RETH_LEN);
            a.ja(go);
            a.bind(short);
            a.mov_imm(R4, HDR_LEN);
            a.bind(go);
        }
        a.mov_imm(R2, 0);
        emit_store_bytes(a, HDR, shot);
        a.mov64(R2, R8);
        a.alu64_imm(Alu::Sub, R2, 4);
        a.mov_imm(R4, 4);
        emit_store_bytes(a, NEW_ICRC, shot);

        a.bind(send);
        a.jmp_imm(Jmp::Eq, R9, i as i32 + 1, last);
        a.mov64(R1, R6);
        a.ldx(Size::W, R2, R7, m + M_IFINDEX as i16);
        a.mov_imm(R3, 0);
        a.call(helper::CLONE_REDIRECT);
        a.ja(next);
        a.bind(last);
        a.atomic_add64(R7, S_COPIES as i16, R9);
        a.ldx(Size::W, R1, R7, m + M_IFINDEX as i16);
        a.mov_imm(R2, 0);
        a.call(helper::REDIRECT);
        a.exit();
        a.bind(next);
    }
    a.ja(shot);
}

impl Maps {
    pub fn create() -> io::Result<Maps> {
        let index = Map::create(bpf::MAP_HASH, 4, 4, MAX_GROUPS as u32, 0)?;
        let slots = MappedArray::create(SLOT_SIZE as u32, MAX_GROUPS as u32)?;
        let tables = Map::create(bpf::MAP_ARRAY, 4, TABLES_SIZE as u32, 1, 0)?;
        let mut t = Vec::with_capacity(TABLES_SIZE);
        for slot in 0..14 {
            for v in 0..=255u8 {
                t.extend_from_slice(&icrc_table_entry(slot, v).to_le_bytes());
            }
        }
        // x^(8Z) by repeated multiplication by x^8.
        let x8 = icrc::zeros_op(1);
        let mut op = icrc::zeros_op(0);
        for _ in 0..OPS {
            t.extend_from_slice(&op.to_le_bytes());
            op = icrc::multmodp(x8, op);
        }
        tables.update(&0u32.to_le_bytes(), &t)?;
        Ok(Maps {
            index,
            slots,
            tables,
        })
    }
}

/// The fast path of a running switch: its maps, one program pair per port, and the
/// groups it holds.
pub struct FastPath {
    maps: Maps,
    /// Per port: its interface index.
    ifindex: Vec<u32>,
    _programs: Vec<Program>,
    _links: Vec<OwnedFd>,
    /// Group address → (slot, what was compiled into it).
    groups: BTreeMap<u32, (usize, FastPathGroup)>,
}

/// A group's counters in the fast path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FastPathCounters {
    pub frames: u64,
    pub copies: u64,
    /// The source's frames left to the daemon while the group was not armed.
    pub deferred: u64,
}

impl FastPath {
    /// Loads the programs for ports `(socket, ifindex)`: the filter onto each port's
    /// socket, the classifier onto each interface's tc ingress.
    pub fn attach(ports: &[(RawFd, u32)]) -> io::Result<FastPath> {
        let maps = Maps::create()?;
        let mut programs = Vec::new();
        let mut links = Vec::new();
        for &(socket, ifindex) in ports {
            let gen = |v| program(v, ifindex, &maps).map_err(io::Error::other);
            let filter = Program::load(
                bpf::PROG_SOCKET_FILTER,
                "rocast_filter",
                &gen(Variant::SocketFilter)?,
            )?;
            filter.attach_socket(socket)?;
            let cls = Program::load(
                bpf::PROG_SCHED_CLS,
                "rocast_fast",
                &gen(Variant::Classifier)?,
            )?;
            links.push(cls.attach_tcx_ingress(ifindex)?);
            programs.push(filter);
            programs.push(cls);
        }
        Ok(FastPath {
            maps,
            ifindex: ports.iter().map(|p| p.1).collect(),
            _programs: programs,
            _links: links,
            groups: BTreeMap::new(),
        })
    }

    fn slot_bytes(&self, g: &FastPathGroup) -> Vec<u8> {
        let mut b = vec![0u8; SLOT_SIZE];
        let put32 =
            |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
        put32(&mut b, S_IN_IFINDEX, self.ifindex[g.in_port as usize]);
        b[S_SRC_IP..S_SRC_IP + 4].copy_from_slice(&g.src_ip.0);
        b[S_QP..S_QP + 3].copy_from_slice(&g.group_qp.to_be_bytes()[1..]);
        put32(&mut b, S_N, g.copies.len() as u32);
        for (i, c) in g.copies.iter().enumerate() {
            let m = S_MEMBERS + i * M_SIZE;
            put32(&mut b, m + M_IFINDEX, self.ifindex[c.port as usize]);
            b[m + M_ETH..m + M_ETH + 6].copy_from_slice(&c.dst_mac.0);
            b[m + M_ETH + 6..m + M_ETH + 12].copy_from_slice(&c.src_mac.0);
            let Some(br) = c.bridge else {
                put32(&mut b, m + M_KIND, 1);
                continue;
            };
            b[m + M_SRC..m + M_SRC + 4].copy_from_slice(&br.mcst_id.0);
            b[m + M_DST..m + M_DST + 4].copy_from_slice(&br.dst_ip.0);
            let words = [br.mcst_id.0, br.dst_ip.0]
                .iter()
                .flat_map(|a| {
                    [
                        u16::from_le_bytes([a[0], a[1]]),
                        u16::from_le_bytes([a[2], a[3]]),
                    ]
                })
                .map(u32::from)
                .sum::<u32>();
            put32(&mut b, m + M_IPSUM, words);
            b[m + M_QP..m + M_QP + 3].copy_from_slice(&br.dst_qp.to_be_bytes()[1..]);
            put32(&mut b, m + M_CRC, c.crc_const);
            if let Some((va, rkey)) = br.region {
                b[m + M_VA..m + M_VA + 8].copy_from_slice(&va.to_le_bytes());
                b[m + M_RKEY..m + M_RKEY + 4].copy_from_slice(&rkey.to_be_bytes());
                put32(&mut b, m + M_HAS_REGION, 1);
            }
        }
        b
    }

    /// Arms group `g` with `high` the highest PSN forwarded so far: from now on its
    /// new data is replicated in the kernel. Re-arming a held group replaces its
    /// copies. False (nothing changed) when every slot is taken.
    pub fn arm(&mut self, g: &FastPathGroup, high: Psn) -> io::Result<bool> {
        self.write(g, high, ARMED)
    }

    /// Replaces a held group's copies (its tree changed), keeping its state and PSN.
    pub fn update(&mut self, g: &FastPathGroup) -> io::Result<()> {
        let Some(&(slot, _)) = self.groups.get(&g.mcst_id.to_u32()) else {
            return Ok(());
        };
        let s = &self.maps.slots;
        let (state, high) = (s.load_u32(slot, S_STATE), s.load_u32(slot, S_HIGH));
        self.write(g, Psn::new(high), state).map(|_| ())
    }

    fn write(&mut self, g: &FastPathGroup, high: Psn, state: u32) -> io::Result<bool> {
        let key = g.mcst_id.0;
        let slot = match self.groups.get(&g.mcst_id.to_u32()) {
            Some(&(slot, _)) => slot,
            None => match (0..MAX_GROUPS).find(|s| !self.groups.values().any(|(t, _)| t == s)) {
                Some(s) => s,
                None => return Ok(false),
            },
        };
        let s = &self.maps.slots;
        // Off while it is rewritten, then the PSN, then the state.
        s.store_u32(slot, S_STATE, OFF);
        let mut bytes = self.slot_bytes(g);
        // Keep the counters across re-arming.
        for off in [S_FRAMES, S_COPIES, S_DEFERRED] {
            bytes[off..off + 8].copy_from_slice(&s.load_u64(slot, off).to_le_bytes());
        }
        s.write(slot, 4, &bytes[4..]);
        s.store_u32(slot, S_HIGH, high.value());
        self.maps.index.update(&key, &(slot as u32).to_le_bytes())?;
        s.store_u32(slot, S_STATE, state);
        self.groups.insert(g.mcst_id.to_u32(), (slot, g.clone()));
        Ok(true)
    }

    /// Takes group `mcst_id` out of the fast path (its frames all go to the daemon).
    pub fn disarm(&mut self, mcst_id: Ipv4Address) -> io::Result<()> {
        if let Some((slot, _)) = self.groups.remove(&mcst_id.to_u32()) {
            self.maps.slots.store_u32(slot, S_STATE, OFF);
            self.maps.index.delete(&mcst_id.0)?;
            for off in [S_FRAMES, S_COPIES, S_DEFERRED] {
                self.maps.slots.write(slot, off, &[0u8; 8]);
            }
        }
        Ok(())
    }

    /// Whether group `mcst_id` is held and armed (not suspended by a frame the fast
    /// path left to the daemon).
    pub fn armed(&self, mcst_id: Ipv4Address) -> bool {
        self.groups
            .get(&mcst_id.to_u32())
            .is_some_and(|&(slot, _)| self.maps.slots.load_u32(slot, S_STATE) == ARMED)
    }

    /// The compiled form of a held group.
    pub fn held(&self, mcst_id: Ipv4Address) -> Option<&FastPathGroup> {
        self.groups.get(&mcst_id.to_u32()).map(|(_, g)| g)
    }

    /// The held groups' addresses.
    pub fn groups(&self) -> Vec<Ipv4Address> {
        self.groups.values().map(|(_, g)| g.mcst_id).collect()
    }

    /// The highest PSN the fast path has forwarded for a held group.
    pub fn high_psn(&self, mcst_id: Ipv4Address) -> Option<Psn> {
        let &(slot, _) = self.groups.get(&mcst_id.to_u32())?;
        Some(Psn::new(self.maps.slots.load_u32(slot, S_HIGH)))
    }

    pub fn counters(&self, mcst_id: Ipv4Address) -> Option<FastPathCounters> {
        let &(slot, _) = self.groups.get(&mcst_id.to_u32())?;
        let s = &self.maps.slots;
        Some(FastPathCounters {
            frames: s.load_u64(slot, S_FRAMES),
            copies: s.load_u64(slot, S_COPIES),
            deferred: s.load_u64(slot, S_DEFERRED),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::{AsFd, BorrowedFd};

    #[test]
    fn the_programs_pass_the_verifier() {
        let maps = Maps::create().expect("bpf maps (needs root)");
        for v in [Variant::SocketFilter, Variant::Classifier] {
            let insns = program(v, 7, &maps).unwrap();
            let kind = match v {
                Variant::SocketFilter => bpf::PROG_SOCKET_FILTER,
                Variant::Classifier => bpf::PROG_SCHED_CLS,
            };
            eprintln!("{v:?}: {} instructions", insns.len());
            if let Err(e) = Program::load(kind, "rocast_test", &insns) {
                panic!("{v:?} ({} instructions): {e}", insns.len());
            }
        }
    }

    /// The core's fast-path stage (`sample_switch`) on veths: switch ports fp0..fp3
    /// in a namespace, hosts' ends fh0..fh3; h0 multicasts to h1..h3 (WRITE regions).
    struct Stage;
    const NS: &str = "rocastfp-t1";
    impl Drop for Stage {
        fn drop(&mut self) {
            let _ = crate::switch_bench::run_step(&["ip", "netns", "del", NS]);
        }
    }

    use rocast_core::switch::fast_path::{
        sample_host_ip as ip, sample_host_mac as mac, sample_switch, SAMPLE_MCST as MCST,
    };

    /// Frames on a non-blocking packet socket until `want` or the deadline; RoCE
    /// frames only (UDP over IPv4: the kernel may speak on a fresh link).
    fn collect(fd: BorrowedFd<'_>, want: usize, wait: std::time::Duration) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let end = std::time::Instant::now() + wait;
        let mut buf = vec![0u8; 16384];
        while out.len() < want && std::time::Instant::now() < end {
            let n = match rustix::net::recv(fd, &mut buf[..], rustix::net::RecvFlags::DONTWAIT) {
                Ok((n, _)) if n > 0 => n,
                _ => {
                    std::thread::sleep(std::time::Duration::from_micros(200));
                    continue;
                }
            };
            let f = &buf[..n];
            if f.len() > 37 && f[12..14] == [8, 0] && f[23] == 17 {
                out.push(f.to_vec());
            }
        }
        out
    }

    #[test]
    fn the_kernel_makes_the_models_frames_and_leaves_the_rest_to_the_daemon() {
        use crate::switch_bench::run_step;
        use rocast_core::fabric::cepheus::VIRTUAL_QPN;
        use rocast_core::switch::fast_path::{sample_frames, source_data, FastPathVerdict};
        use std::os::fd::AsRawFd;
        let _ = run_step(&["ip", "netns", "del", NS]);
        run_step(&["ip", "netns", "add", NS]).expect("ip netns (needs root)");
        let stage = Stage;
        for k in ["all", "default"] {
            let key = format!("net.ipv6.conf.{k}.disable_ipv6=1");
            run_step(&["ip", "netns", "exec", NS, "sysctl", "-q", "-w", &key]).unwrap();
        }
        for p in 0..4 {
            let (fp, fh) = (format!("fp{p}"), format!("fh{p}"));
            run_step(&[
                "ip", "-n", NS, "link", "add", &fp, "mtu", "9000", "type", "veth", "peer", "name",
                &fh, "mtu", "9000",
            ])
            .unwrap();
            for i in [&fp, &fh] {
                run_step(&["ip", "-n", NS, "link", "set", i, "up"]).unwrap();
            }
        }
        let worker = std::thread::spawn(|| {
            crate::switch_bench::enter_namespace(NS).unwrap();
            let ports: Vec<(OwnedFd, u32)> = (0..4)
                .map(|p| {
                    let name = format!("fp{p}");
                    let fd = crate::switch::open_afpacket(&name).unwrap();
                    let index = rustix::net::netdevice::name_to_index(&fd, &name).unwrap();
                    (fd, index)
                })
                .collect();
            let raw: Vec<(RawFd, u32)> = ports.iter().map(|(f, i)| (f.as_raw_fd(), *i)).collect();
            let mut fast = FastPath::attach(&raw).unwrap();
            let sender = crate::switch_bench::packet_socket("fh0").unwrap();
            let receivers: Vec<OwnedFd> = (1..4)
                .map(|p| {
                    crate::switch::bound_packet_socket(&format!("fh{p}"), libc::SOCK_NONBLOCK)
                        .unwrap()
                        .0
                })
                .collect();
            let mut sw = sample_switch(Vec::new(), [(0, 0), (1, 1), (2, 2), (3, 3)]);
            let now = rocast_core::time::Instant::from_ps(2_000_000);
            let mut buf = vec![0u8; 16384];
            let mut pipeline = |sw: &mut rocast_core::switch::FrameSwitch, f: &[u8]| {
                sw.handle_frame(now, 0, f);
                let mut out = Vec::new();
                while let Some(t) = sw.poll_transmit(now, &mut buf) {
                    out.push((t.port, buf[..t.len].to_vec()));
                }
                out.sort();
                out
            };
            let first = sample_frames(mac(0), sw.port_mac(0), ip(0), MCST, VIRTUAL_QPN, 99);
            pipeline(&mut sw, &first[0]);
            let g = sw.fast_path_group(MCST, ip(0), VIRTUAL_QPN).unwrap();
            let mut high = Psn::new(99);
            assert!(fast.arm(&g, high).unwrap());
            let frames = sample_frames(mac(0), sw.port_mac(0), ip(0), MCST, VIRTUAL_QPN, 100);
            let (mut forwarded, mut deferred) = (0u64, 0u64);
            let short = std::time::Duration::from_millis(30);
            let long = std::time::Duration::from_secs(2);
            for (i, f) in frames.iter().enumerate() {
                let want_pipeline = pipeline(&mut sw, f);
                let n = rustix::net::send(&sender, f, rustix::net::SendFlags::empty());
                assert_eq!(n, Ok(f.len()), "frame {i}: send");
                match g.forward(high, f) {
                    FastPathVerdict::Forward { psn, frames: want } => {
                        let mut got = Vec::new();
                        for (k, r) in receivers.iter().enumerate() {
                            for c in collect(r.as_fd(), 1, long) {
                                got.push((k as u16 + 1, c));
                            }
                        }
                        let mut want = want;
                        want.sort();
                        got.sort();
                        assert_eq!(got, want, "frame {i}: the kernel's copies are the model's");
                        if i + 1 < frames.len() {
                            assert_eq!(got, want_pipeline, "frame {i}: and the pipeline's");
                        } else {
                            assert!(want_pipeline.is_empty(), "the corrupted frame");
                        }
                        assert!(
                            collect(ports[0].0.as_fd(), 1, short).is_empty(),
                            "frame {i}: hidden from the daemon"
                        );
                        assert!(fast.armed(MCST));
                        high = psn;
                        forwarded += 1;
                    }
                    FastPathVerdict::Defer => {
                        let up = collect(ports[0].0.as_fd(), 1, long);
                        assert_eq!(up, vec![f.clone()], "frame {i}: to the daemon as it came");
                        for r in &receivers {
                            assert!(
                                collect(r.as_fd(), 1, short).is_empty(),
                                "frame {i}: no copy"
                            );
                        }
                        assert!(!fast.armed(MCST), "frame {i}: the group is suspended");
                        // The daemon re-arms from the PSN it forwarded, if it did.
                        if let Some(d) = source_data(f).filter(|_| !want_pipeline.is_empty()) {
                            if d.src_ip == g.src_ip && d.dest_qp == g.group_qp {
                                high = high.max(d.psn);
                            }
                        }
                        assert!(fast.arm(&g, high).unwrap());
                        deferred += 1;
                    }
                }
            }
            let c = fast.counters(MCST).unwrap();
            assert_eq!(
                c,
                FastPathCounters {
                    frames: forwarded,
                    copies: 3 * forwarded,
                    deferred
                }
            );
            assert_eq!((forwarded, deferred), (20, 8));
        });
        let r = worker.join();
        drop(stage);
        if let Err(e) = r {
            std::panic::resume_unwind(e);
        }
    }
}
