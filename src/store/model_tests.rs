//! The model test of the whole store (being written).
