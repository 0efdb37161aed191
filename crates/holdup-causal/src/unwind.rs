//! User call chains of samples, unwound inside the target.
//!
//! The recorder gives each sample the user registers, a frame-pointer walk
//! done by the kernel, and a copy of the top of the user stack. Debian's libc
//! has no frame pointers, so the frame-pointer walk from inside `pread` skips
//! its caller — the very line a blocked sample must be charged to. The leaf
//! frames are therefore unwound with the CFI of the mapped `.eh_frame`
//! (x86-64: CFA = rsp/rbp + n, return address and rbp saved at CFA + n),
//! reading the stack copy; once a read falls outside the copy, the walk
//! continues on the kernel's frame-pointer chain from the recovered rbp.

use crate::modules::Modules;
use gimli::UnwindSection;
use holdup_bpf::records::{fp_continue, UNMAPPED_OK};
use std::collections::HashMap;

pub use holdup_bpf::records::UserStack;

const RSP: u16 = 7;
const RBP: u16 = 6;
const RA: u16 = 16;
const MAX_FRAMES: usize = 128;

/// How to step out of a frame at a given address.
#[derive(Clone, Copy, Debug)]
struct Step {
    cfa_from_rbp: bool,
    cfa_offset: i64,
    ra_offset: i64,
    /// Where the caller's rbp was saved, if it was.
    rbp_offset: Option<i64>,
}

#[derive(Default)]
pub struct Unwinder {
    cache: HashMap<u64, Option<Step>>,
    ctx: Option<Box<gimli::UnwindContext<usize>>>,
}

impl Unwinder {
    /// Frames of `stack`, leaf first: `out[0]` is the IP, the others are
    /// return addresses.
    pub fn unwind(&mut self, mods: &Modules, stack: &UserStack<'_>, out: &mut Vec<u64>) {
        out.clear();
        if stack.ip == 0 {
            return;
        }
        out.push(stack.ip);
        let (mut pc, mut sp, mut bp) = (stack.ip, stack.sp, stack.bp);
        let mut leaf = true;
        while out.len() < MAX_FRAMES {
            let lookup = if leaf { pc } else { pc - 1 };
            let Some(step) = self.step_for(mods, lookup) else {
                break;
            };
            let base = if step.cfa_from_rbp { bp } else { sp };
            let cfa = base.wrapping_add(step.cfa_offset as u64);
            let Some(ra) = stack.read(cfa.wrapping_add(step.ra_offset as u64)) else {
                break;
            };
            let new_bp = match step.rbp_offset {
                Some(o) => match stack.read(cfa.wrapping_add(o as u64)) {
                    Some(v) => v,
                    None => break,
                },
                None => bp,
            };
            if ra == 0 || cfa <= sp {
                return; // outermost frame, or a corrupt step
            }
            out.push(ra);
            pc = ra;
            sp = cfa;
            bp = new_bp;
            leaf = false;
        }
        // Frame pointers from here: first the kernel's walk (the rule the
        // symbolizer follows too), then the copy.
        if let Some(chain) = fp_continue(stack.fp_chain, sp, bp) {
            for ra in chain {
                if out.len() >= MAX_FRAMES || (out.len() >= UNMAPPED_OK && mods.find(ra).is_none())
                {
                    break;
                }
                out.push(ra);
            }
            return;
        }
        while out.len() < MAX_FRAMES {
            let (Some(next), Some(ra)) = (stack.read(bp), stack.read(bp.wrapping_add(8))) else {
                break;
            };
            if ra == 0 {
                break;
            }
            out.push(ra);
            if next <= bp {
                break;
            }
            bp = next;
        }
    }

    fn step_for(&mut self, mods: &Modules, addr: u64) -> Option<Step> {
        if let Some(s) = self.cache.get(&addr) {
            return *s;
        }
        let step = self.compute(mods, addr);
        if self.cache.len() > 1 << 16 {
            self.cache.clear();
        }
        self.cache.insert(addr, step);
        step
    }

    fn compute(&mut self, mods: &Modules, addr: u64) -> Option<Step> {
        let m = &mods.list[mods.find(addr)?];
        let eh = m.eh.as_ref()?;
        let bases = gimli::BaseAddresses::default()
            .set_eh_frame_hdr(eh.hdr_avma)
            .set_eh_frame(eh.frame_avma)
            .set_text(m.text.first()?.0);
        let hdr = gimli::EhFrameHdr::new(eh.hdr, gimli::NativeEndian)
            .parse(&bases, 8)
            .ok()?;
        let table = hdr.table()?;
        let mut frame = gimli::EhFrame::new(eh.frame, gimli::NativeEndian);
        frame.set_address_size(8);
        let ctx = self
            .ctx
            .get_or_insert_with(|| Box::new(gimli::UnwindContext::new()));
        let row = table
            .unwind_info_for_address(&frame, &bases, ctx, addr, gimli::EhFrame::cie_from_offset)
            .ok()?;
        let (cfa_from_rbp, cfa_offset) = match *row.cfa() {
            gimli::CfaRule::RegisterAndOffset { register, offset } => match register.0 {
                RSP => (false, offset),
                RBP => (true, offset),
                _ => return None,
            },
            gimli::CfaRule::Expression(_) => return None,
        };
        let ra_offset = match row.register(gimli::Register(RA))? {
            gimli::RegisterRule::Offset(o) => o,
            _ => return None,
        };
        let rbp_offset = match row.register(gimli::Register(RBP)) {
            None | Some(gimli::RegisterRule::SameValue) => None,
            Some(gimli::RegisterRule::Offset(o)) => Some(o),
            Some(_) => return None,
        };
        Some(Step {
            cfa_from_rbp,
            cfa_offset,
            ra_offset,
            rbp_offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unwind(chain: &[(u64, u64)]) -> Vec<u64> {
        // No modules: no CFI, so the walk goes straight to the chain.
        let stack = UserStack {
            ip: 0x5,
            sp: 0x800,
            bp: 0x1000,
            fp_chain: chain,
            copy: &[],
        };
        let mut out = Vec::new();
        Unwinder::default().unwind(&Modules::default(), &stack, &mut out);
        out
    }

    #[test]
    fn the_frame_pointer_fallback_stops_where_the_chain_goes_astray() {
        // A link back down the stack ends the walk.
        assert_eq!(unwind(&[(0x1000, 0x10), (0x900, 0x20)]), vec![0x5, 0x10]);
        // So does an unmapped return address past the first frames.
        let up = [
            (0x1000, 0x10),
            (0x2000, 0x20),
            (0x3000, 0x30),
            (0x4000, 0x40),
        ];
        assert_eq!(unwind(&up), vec![0x5, 0x10, 0x20]);
        // bp is no frame on the chain: the walk starts at the first link above sp.
        assert_eq!(unwind(&[(0x700, 0x1), (0x900, 0x10)]), vec![0x5, 0x10]);
    }
}
