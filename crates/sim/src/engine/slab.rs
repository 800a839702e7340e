//! The packet slab: every packet in the fabric is a [`SimPacket`] record in a slot
//! reused through a free list (so steady state allocates nothing per packet), with its
//! payload bytes beside it when the run carries payloads. Queues and links hold a
//! slot's index (inside a `Hop`), never the record.

use super::Engine;
use crate::packet::SimPacket;

/// Packet records and their payloads, by slot.
#[derive(Default)]
pub(super) struct PacketSlab {
    pub(super) records: Vec<SimPacket>,
    /// Slots whose packets are gone, reused before the slab grows.
    free_slots: Vec<u32>,
    /// Payload bytes per slot, when `carry_payload`. A slot's payload stays in place
    /// until the slot is reused.
    pub(super) payloads: Vec<Vec<u8>>,
    /// The payload of the next record to allocate (swapped into its slot, so buffers
    /// are reused, not reallocated).
    pub(super) scratch: Vec<u8>,
}

impl PacketSlab {
    /// Stores `p` in a free slot, or a new one; `peak` follows the most slots in use.
    pub(super) fn alloc(&mut self, p: SimPacket, peak: &mut u64) -> u32 {
        if let Some(i) = self.free_slots.pop() {
            self.records[i as usize] = p;
            i
        } else {
            self.records.push(p);
            let n = self.records.len() as u64;
            *peak = (*peak).max(n);
            n as u32 - 1
        }
    }

    /// Frees slot `i` for reuse.
    pub(super) fn free(&mut self, i: u32) {
        self.free_slots.push(i);
    }

    /// Slot `pkt`'s payload, copied into the scratch.
    pub(super) fn payload_to_scratch(&mut self, pkt: u32) {
        self.scratch.clear();
        if let Some(d) = self.payloads.get(pkt as usize) {
            self.scratch.extend_from_slice(d);
        }
    }

    /// The scratch becomes slot `n`'s payload (its old buffer becomes the scratch).
    pub(super) fn scratch_to_slot(&mut self, n: u32) {
        if self.payloads.len() <= n as usize {
            self.payloads.resize_with(n as usize + 1, Vec::new);
        }
        std::mem::swap(&mut self.payloads[n as usize], &mut self.scratch);
    }
}

impl Engine {
    pub(super) fn alloc(&mut self, p: SimPacket) -> u32 {
        self.packets.alloc(p, &mut self.stats.totals.peak_packets)
    }

    pub(super) fn release(&mut self, i: u32) {
        self.packets.free(i);
    }

    /// A new record for `copy` of packet `pkt`, with `pkt`'s payload when payloads
    /// are carried.
    pub(super) fn alloc_copy_of(&mut self, pkt: u32, copy: SimPacket) -> u32 {
        let carried = self.cfg.carry_payload && copy.is_data();
        if carried {
            self.packets.payload_to_scratch(pkt);
        }
        self.alloc_with_scratch_payload(copy, carried)
    }

    /// Allocates a slot for `p`; with `carried`, the slot's payload becomes the
    /// slab's scratch.
    pub(super) fn alloc_with_scratch_payload(&mut self, p: SimPacket, carried: bool) -> u32 {
        let n = self.alloc(p);
        if carried {
            self.packets.scratch_to_slot(n);
        }
        n
    }
}
