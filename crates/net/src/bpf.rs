//! eBPF without a toolchain: an assembler for the kernel's instruction set and the
//! few `bpf(2)` commands the switch's fast path needs (maps, program load, a tcx link,
//! a socket filter). rocast generates its kernel programs from Rust at run time, from
//! the core's compiled tables, so nothing needs clang or libbpf and the
//! program is always the one this binary's model describes.
//!
//! Encoding: `linux/bpf_common.h` and `linux/bpf.h` (instruction classes, ALU and jump
//! ops, `BPF_PSEUDO_MAP_FD`, helper numbers). Helper numbers are ABI and never change.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub const R0: u8 = 0;
pub const R1: u8 = 1;
pub const R2: u8 = 2;
pub const R3: u8 = 3;
pub const R4: u8 = 4;
pub const R5: u8 = 5;
pub const R6: u8 = 6;
pub const R7: u8 = 7;
pub const R8: u8 = 8;
pub const R9: u8 = 9;
/// The read-only frame pointer.
pub const FP: u8 = 10;

/// Access sizes.
#[derive(Clone, Copy, Debug)]
pub enum Size {
    B = 0x10,
    H = 0x08,
    W = 0x00,
    DW = 0x18,
}

/// ALU operations.
#[derive(Clone, Copy, Debug)]
pub enum Alu {
    Add = 0x00,
    Sub = 0x10,
    Or = 0x40,
    And = 0x50,
    Lsh = 0x60,
    Rsh = 0x70,
    Xor = 0xa0,
    Mov = 0xb0,
}

/// Conditional jumps (unsigned comparisons).
#[derive(Clone, Copy, Debug)]
pub enum Jmp {
    Eq = 0x10,
    Gt = 0x20,
    Ge = 0x30,
    Ne = 0x50,
    Lt = 0xa0,
    Le = 0xb0,
}

/// Helper functions (`enum bpf_func_id`).
pub mod helper {
    pub const MAP_LOOKUP_ELEM: i32 = 1;
    pub const SKB_STORE_BYTES: i32 = 9;
    pub const CLONE_REDIRECT: i32 = 13;
    pub const REDIRECT: i32 = 23;
    pub const SKB_LOAD_BYTES: i32 = 26;
}

const CLASS_LD: u8 = 0x00;
const CLASS_LDX: u8 = 0x01;
const CLASS_ST: u8 = 0x02;
const CLASS_STX: u8 = 0x03;
const CLASS_ALU: u8 = 0x04;
const CLASS_JMP: u8 = 0x05;
const CLASS_ALU64: u8 = 0x07;
const MODE_MEM: u8 = 0x60;
const MODE_ATOMIC: u8 = 0xc0;
const SRC_X: u8 = 0x08;

/// One instruction (`struct bpf_insn`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Insn {
    pub code: u8,
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (dst & 0xf) | (src << 4),
        off,
        imm,
    }
}

/// Why [`Asm::finish`] could not resolve the program's jumps (a bug in the generator,
/// not bad input).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AsmError {
    #[error("label {0:?} never bound")]
    Unbound(Label),
    #[error("jump {0} too far")]
    TooFar(i64),
}

/// A forward or backward jump target.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Label(u32);

/// A program under construction, with labels resolved at [`Asm::finish`].
#[derive(Default)]
pub struct Asm {
    insns: Vec<Insn>,
    next_label: u32,
    bound: BTreeMap<Label, usize>,
    fixups: Vec<(usize, Label)>,
}

impl Asm {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn label(&mut self) -> Label {
        self.next_label += 1;
        Label(self.next_label)
    }
    pub fn bind(&mut self, l: Label) {
        self.bound.insert(l, self.insns.len());
    }
    /// 64-bit `dst op= imm` (imm sign-extended).
    pub fn alu64_imm(&mut self, op: Alu, dst: u8, imm: i32) {
        self.insns
            .push(insn(CLASS_ALU64 | op as u8, dst, 0, 0, imm));
    }
    pub fn alu64_reg(&mut self, op: Alu, dst: u8, src: u8) {
        self.insns
            .push(insn(CLASS_ALU64 | op as u8 | SRC_X, dst, src, 0, 0));
    }
    /// 32-bit `dst op= imm`; the upper half of `dst` becomes zero.
    pub fn alu32_imm(&mut self, op: Alu, dst: u8, imm: i32) {
        self.insns.push(insn(CLASS_ALU | op as u8, dst, 0, 0, imm));
    }
    pub fn alu32_reg(&mut self, op: Alu, dst: u8, src: u8) {
        self.insns
            .push(insn(CLASS_ALU | op as u8 | SRC_X, dst, src, 0, 0));
    }
    pub fn mov64(&mut self, dst: u8, src: u8) {
        self.alu64_reg(Alu::Mov, dst, src);
    }
    pub fn mov_imm(&mut self, dst: u8, imm: i32) {
        self.alu64_imm(Alu::Mov, dst, imm);
    }
    /// Byte swap of the low `bits` (16, 32, 64) of `dst` to big-endian (a swap on a
    /// little-endian host).
    pub fn to_be(&mut self, dst: u8, bits: i32) {
        self.insns
            .push(insn(CLASS_ALU | 0xd0 | SRC_X, dst, 0, 0, bits));
    }
    pub fn ldx(&mut self, size: Size, dst: u8, src: u8, off: i16) {
        self.insns
            .push(insn(CLASS_LDX | MODE_MEM | size as u8, dst, src, off, 0));
    }
    pub fn stx(&mut self, size: Size, dst: u8, off: i16, src: u8) {
        self.insns
            .push(insn(CLASS_STX | MODE_MEM | size as u8, dst, src, off, 0));
    }
    pub fn st_imm(&mut self, size: Size, dst: u8, off: i16, imm: i32) {
        self.insns
            .push(insn(CLASS_ST | MODE_MEM | size as u8, dst, 0, off, imm));
    }
    /// `*(u64 *)(dst + off) += src`, atomically.
    pub fn atomic_add64(&mut self, dst: u8, off: i16, src: u8) {
        self.insns.push(insn(
            CLASS_STX | MODE_ATOMIC | Size::DW as u8,
            dst,
            src,
            off,
            0,
        ));
    }
    pub fn jmp_imm(&mut self, op: Jmp, dst: u8, imm: i32, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.insns.push(insn(CLASS_JMP | op as u8, dst, 0, 0, imm));
    }
    pub fn jmp_reg(&mut self, op: Jmp, dst: u8, src: u8, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.insns
            .push(insn(CLASS_JMP | op as u8 | SRC_X, dst, src, 0, 0));
    }
    pub fn ja(&mut self, to: Label) {
        self.fixups.push((self.insns.len(), to));
        self.insns.push(insn(CLASS_JMP, 0, 0, 0, 0));
    }
    pub fn call(&mut self, helper: i32) {
        self.insns.push(insn(CLASS_JMP | 0x80, 0, 0, 0, helper));
    }
    pub fn exit(&mut self) {
        self.insns.push(insn(CLASS_JMP | 0x90, 0, 0, 0, 0));
    }
    /// `dst = map` (the two-slot load of a map's descriptor).
    pub fn ld_map_fd(&mut self, dst: u8, fd: RawFd) {
        const PSEUDO_MAP_FD: u8 = 1;
        self.insns
            .push(insn(CLASS_LD | Size::DW as u8, dst, PSEUDO_MAP_FD, 0, fd));
        self.insns.push(insn(0, 0, 0, 0, 0));
    }
    /// Resolves the labels. Fails on an unbound label or a jump out of range (a bug in
    /// the generator, not bad input).
    pub fn finish(mut self) -> Result<Vec<Insn>, AsmError> {
        for &(at, l) in &self.fixups {
            let to = *self.bound.get(&l).ok_or(AsmError::Unbound(l))?;
            let off = to as i64 - at as i64 - 1;
            self.insns[at].off = i16::try_from(off).map_err(|_| AsmError::TooFar(off))?;
        }
        Ok(self.insns)
    }
}

// Commands and types of `bpf(2)`.
const BPF_MAP_CREATE: i32 = 0;
const BPF_MAP_UPDATE_ELEM: i32 = 2;
const BPF_MAP_DELETE_ELEM: i32 = 3;
const BPF_PROG_LOAD: i32 = 5;
const BPF_LINK_CREATE: i32 = 28;
pub const MAP_HASH: u32 = 1;
pub const MAP_ARRAY: u32 = 2;
/// `BPF_F_MMAPABLE`: an array user space maps and reads and writes directly.
pub const MAP_F_MMAPABLE: u32 = 1 << 10;
pub const PROG_SOCKET_FILTER: u32 = 1;
pub const PROG_SCHED_CLS: u32 = 3;
/// `BPF_TCX_INGRESS` (Linux 6.6+).
pub const ATTACH_TCX_INGRESS: u32 = 46;

fn sys_bpf(cmd: i32, attr: &mut [u64; 16]) -> io::Result<i64> {
    // SAFETY: attr is a zero-padded `union bpf_attr` of 128 bytes, valid for the
    // kernel to read and write; any pointers in it point at live buffers the caller
    // keeps for the call. Raw: neither libc, rustix nor std wraps bpf(2).
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr.as_mut_ptr() as *mut libc::c_void,
            std::mem::size_of_val(attr) as u32,
        )
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(r)
    }
}

/// [`sys_bpf`] for a command that creates an object (map, program, link): its new
/// descriptor, owned.
fn sys_bpf_fd(cmd: i32, attr: &mut [u64; 16]) -> io::Result<OwnedFd> {
    let fd = sys_bpf(cmd, attr)?;
    // SAFETY: on success these commands return a fresh descriptor that nothing else
    // owns or closes.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

fn lo_hi(lo: u32, hi: u32) -> u64 {
    lo as u64 | (hi as u64) << 32
}

/// A BPF map.
pub struct Map {
    fd: OwnedFd,
    pub key_size: u32,
    pub value_size: u32,
    pub max_entries: u32,
}

impl Map {
    pub fn create(
        kind: u32,
        key_size: u32,
        value_size: u32,
        max_entries: u32,
        flags: u32,
    ) -> io::Result<Map> {
        let mut a = [0u64; 16];
        a[0] = lo_hi(kind, key_size);
        a[1] = lo_hi(value_size, max_entries);
        a[2] = flags as u64;
        let fd = sys_bpf_fd(BPF_MAP_CREATE, &mut a)
            .map_err(|e| io::Error::new(e.kind(), format!("bpf map create: {e}")))?;
        Ok(Map {
            fd,
            key_size,
            value_size,
            max_entries,
        })
    }
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    fn elem(&self, cmd: i32, key: &[u8], value: *mut u8, flags: u64) -> io::Result<()> {
        assert_eq!(key.len(), self.key_size as usize);
        let mut a = [0u64; 16];
        a[0] = self.fd() as u32 as u64;
        a[1] = key.as_ptr() as u64;
        a[2] = value as u64;
        a[3] = flags;
        sys_bpf(cmd, &mut a).map(|_| ())
    }
    pub fn update(&self, key: &[u8], value: &[u8]) -> io::Result<()> {
        assert_eq!(value.len(), self.value_size as usize);
        self.elem(BPF_MAP_UPDATE_ELEM, key, value.as_ptr() as *mut u8, 0)
    }
    pub fn delete(&self, key: &[u8]) -> io::Result<()> {
        match self.elem(BPF_MAP_DELETE_ELEM, key, std::ptr::null_mut(), 0) {
            Err(e) if e.raw_os_error() != Some(libc::ENOENT) => Err(e),
            _ => Ok(()),
        }
    }
}

/// An array map created with [`MAP_F_MMAPABLE`], mapped into this process: element
/// `i` is `value_size` bytes (rounded up to 8) at `i * stride`.
pub struct MappedArray {
    pub map: Map,
    mapping: memmap2::MmapRaw,
    pub stride: usize,
}

impl MappedArray {
    pub fn create(value_size: u32, max_entries: u32) -> io::Result<MappedArray> {
        let map = Map::create(MAP_ARRAY, 4, value_size, max_entries, MAP_F_MMAPABLE)?;
        let stride = (value_size as usize).div_ceil(8) * 8;
        let page = rustix::param::page_size();
        let len = (stride * max_entries as usize).div_ceil(page) * page;
        // The array's pages, shared (read and write) with the kernel and the programs.
        let mapping = memmap2::MmapOptions::new().len(len).map_raw(map.fd())?;
        Ok(MappedArray {
            map,
            mapping,
            stride,
        })
    }
    /// The address of byte `off` of element `i`, for atomic access. Panics if out of
    /// range (a caller bug).
    pub fn at(&self, i: usize, off: usize) -> *mut u8 {
        assert!(i < self.map.max_entries as usize && off < self.stride);
        // SAFETY: in bounds of the mapping (max_entries strides fit in it), checked above.
        unsafe { self.mapping.as_mut_ptr().add(i * self.stride + off) }
    }
    pub fn load_u32(&self, i: usize, off: usize) -> u32 {
        assert_eq!(off % 4, 0);
        // SAFETY: aligned (stride and off are multiples of 4) and in bounds.
        unsafe {
            (*(self.at(i, off) as *const std::sync::atomic::AtomicU32))
                .load(std::sync::atomic::Ordering::Acquire)
        }
    }
    pub fn store_u32(&self, i: usize, off: usize, v: u32) {
        assert_eq!(off % 4, 0);
        // SAFETY: as in load_u32.
        unsafe {
            (*(self.at(i, off) as *const std::sync::atomic::AtomicU32))
                .store(v, std::sync::atomic::Ordering::Release)
        }
    }
    pub fn load_u64(&self, i: usize, off: usize) -> u64 {
        assert_eq!(off % 8, 0);
        // SAFETY: aligned (stride and off are multiples of 8) and in bounds.
        unsafe {
            (*(self.at(i, off) as *const std::sync::atomic::AtomicU64))
                .load(std::sync::atomic::Ordering::Acquire)
        }
    }
    /// Writes bytes into element `i` from `off` (fields the kernel side only reads
    /// while the element is not live).
    pub fn write(&self, i: usize, off: usize, bytes: &[u8]) {
        assert!(off + bytes.len() <= self.stride);
        // SAFETY: in bounds, checked above; the mapping is writable.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.at(i, off), bytes.len()) }
    }
}

/// A loaded program.
pub struct Program {
    fd: OwnedFd,
}

impl Program {
    /// Loads `insns` as `prog_type`; a refusal carries the verifier's log.
    pub fn load(prog_type: u32, name: &str, insns: &[Insn]) -> io::Result<Program> {
        let license = b"GPL\0";
        let mut log = vec![0u8; 1 << 20];
        let mut a = [0u64; 16];
        a[0] = lo_hi(prog_type, insns.len() as u32);
        a[1] = insns.as_ptr() as u64;
        a[2] = license.as_ptr() as u64;
        // log_level 1 only on a retry: a log costs the load time.
        a[3] = lo_hi(0, 0);
        let mut nm = [0u8; 16];
        for (d, s) in nm.iter_mut().zip(name.bytes().take(15)) {
            *d = s;
        }
        // prog_name at byte 48 (after kern_version and prog_flags at 40..48).
        a[6] = u64::from_le_bytes(nm[..8].try_into().unwrap());
        a[7] = u64::from_le_bytes(nm[8..].try_into().unwrap());
        match sys_bpf_fd(BPF_PROG_LOAD, &mut a) {
            Ok(fd) => Ok(Program { fd }),
            Err(first) => {
                a[3] = lo_hi(1, log.len() as u32);
                a[4] = log.as_mut_ptr() as u64;
                let _ = sys_bpf_fd(BPF_PROG_LOAD, &mut a);
                let end = log.iter().position(|&b| b == 0).unwrap_or(log.len());
                let text = String::from_utf8_lossy(&log[..end]);
                let tail: Vec<&str> = text.lines().rev().take(30).collect();
                Err(io::Error::new(
                    first.kind(),
                    format!(
                        "bpf program {name}: {first}; verifier says:\n{}",
                        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                    ),
                ))
            }
        }
    }
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    /// Attaches to `ifindex`'s tc ingress through a tcx link; the program stays
    /// attached while the returned link is open (so it goes when the process does).
    pub fn attach_tcx_ingress(&self, ifindex: u32) -> io::Result<OwnedFd> {
        let mut a = [0u64; 16];
        a[0] = lo_hi(self.fd() as u32, ifindex);
        a[1] = lo_hi(ATTACH_TCX_INGRESS, 0);
        sys_bpf_fd(BPF_LINK_CREATE, &mut a)
            .map_err(|e| io::Error::new(e.kind(), format!("tcx attach to ifindex {ifindex}: {e}")))
    }
    /// Attaches as `socket`'s filter (`SO_ATTACH_BPF`).
    pub fn attach_socket(&self, socket: RawFd) -> io::Result<()> {
        crate::udp::setsockopt_int(socket, libc::SOL_SOCKET, libc::SO_ATTACH_BPF, self.fd())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jumps_resolve_to_their_labels() {
        let mut a = Asm::new();
        let out = a.label();
        let back = a.label();
        a.bind(back);
        a.mov_imm(R0, 1);
        a.jmp_imm(Jmp::Eq, R1, 0, out);
        a.ja(back);
        a.bind(out);
        a.exit();
        let p = a.finish().unwrap();
        assert_eq!(p[1].off, 1, "forward over the ja");
        assert_eq!(p[2].off, -3, "back to the mov");
        assert_eq!(p[1].code, 0x15);
        assert_eq!(p[1].regs, 0x01);
        let mut b = Asm::new();
        let l = b.label();
        b.ja(l);
        assert!(b.finish().is_err());
    }
}
