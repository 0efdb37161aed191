//! Renderers: text tables, JSON, flame graphs, DOT.

pub mod advice;
pub mod causal;
pub mod critical;
pub mod export;
pub mod flame;
pub mod html;
pub mod latency;
pub mod report;
pub mod syscalls;
pub mod waitgraph;
