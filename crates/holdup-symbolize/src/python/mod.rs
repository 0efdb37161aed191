//! CPython frames without flags: what the recorder needs to walk an
//! interpreter's frames (the layout of its structures, read from its binary:
//! [`layout`]), the lines of the frames it walked ([`lines`]), and where they
//! go in the native stack ([`splice`]).

pub mod layout;
pub mod lines;
pub mod splice;

pub use layout::{inspect, CodeCounter, CounterAt, GilAt, Interpreter, Layout, Refusal};
