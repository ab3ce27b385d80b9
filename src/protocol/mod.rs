//! MySQL wire-protocol pieces shared by the frontend and the backend:
//! framing ([`frame`]) and the packets the proxy writes itself ([`packets`]).

pub mod binary;
pub mod charset;
pub mod frame;
pub mod packets;

pub use frame::{Frame, FrameReader, FrameWriter, MAX_FRAME_PAYLOAD};
