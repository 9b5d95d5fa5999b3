//! gen

pub mod dist;
