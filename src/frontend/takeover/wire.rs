//! The takeover channel: length-prefixed JSON messages over a local Unix
//! stream socket, each carrying any file descriptors with it (SCM_RIGHTS),
//! and the peer's user checked on both ends (SO_PEERCRED). Written on
//! `libc` (already a dependency): std's ancillary-data API is unstable.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncReadExt, Interest};
use tokio::net::UnixStream;

/// Most descriptors one message carries (the three listeners).
const MAX_FDS: usize = 4;

/// Most bytes of one message (a session with many prepared statements).
pub const MAX_MESSAGE: usize = 64 << 20;

/// One end of a takeover channel.
pub struct Channel {
    stream: UnixStream,
}

impl Channel {
    /// Wraps a connected socket after checking that the process at the
    /// other end runs as this process's user.
    pub fn new(stream: UnixStream) -> io::Result<Self> {
        // SAFETY: getuid cannot fail and touches no memory.
        let own = unsafe { libc::getuid() };
        same_user(peer_uid(&stream)?, own)?;
        Ok(Self { stream })
    }

    /// Sends `message` with `fds` (duplicated into the peer by the kernel;
    /// ours stay open).
    pub async fn send<T: Serialize>(&self, message: &T, fds: &[RawFd]) -> io::Result<()> {
        let body = serde_json::to_vec(message).map_err(io::Error::other)?;
        let len = u32::try_from(body.len())
            .ok()
            .filter(|&len| len as usize <= MAX_MESSAGE)
            .ok_or_else(|| io::Error::other("takeover message too long"))?;
        let mut bytes = len.to_le_bytes().to_vec();
        bytes.extend_from_slice(&body);
        let mut sent = 0;
        while sent < bytes.len() {
            let rest = &bytes[sent..];
            let with = if sent == 0 { fds } else { &[] };
            sent += self
                .stream
                .async_io(Interest::WRITABLE, || {
                    send_with_fds(self.stream.as_raw_fd(), rest, with)
                })
                .await?;
        }
        Ok(())
    }

    /// Whether the peer closed the channel (looked at without reading).
    pub fn peer_gone(&self) -> bool {
        let mut byte = 0u8;
        // SAFETY: recv writes at most one byte into `byte`.
        let read = unsafe {
            libc::recv(
                self.stream.as_raw_fd(),
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        read == 0 || (read < 0 && io::Error::last_os_error().kind() != io::ErrorKind::WouldBlock)
    }

    /// The next message and the descriptors that came with it; an
    /// `UnexpectedEof` error when the peer closed the channel.
    pub async fn recv<T: DeserializeOwned>(&mut self) -> io::Result<(T, Vec<OwnedFd>)> {
        let (value, fds) = self.recv_value().await?;
        let message = serde_json::from_value(value)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok((message, fds))
    }

    /// The next message as untyped JSON (the first one is read so, to look
    /// at its format version before anything else).
    pub async fn recv_value(&mut self) -> io::Result<(serde_json::Value, Vec<OwnedFd>)> {
        let mut header = [0u8; 4];
        let mut got = 0;
        let mut fds = Vec::new();
        while got < header.len() {
            let read = self
                .stream
                .async_io(Interest::READABLE, || {
                    recv_with_fds(self.stream.as_raw_fd(), &mut header[got..], &mut fds)
                })
                .await?;
            if read == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the takeover peer closed the channel",
                ));
            }
            got += read;
        }
        let len = u32::from_le_bytes(header) as usize;
        if len > MAX_MESSAGE {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a takeover message of {len} bytes"),
            ));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await?;
        let value = serde_json::from_slice(&body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        Ok((value, fds))
    }
}

/// Refuses a takeover peer running as another user than `own`.
fn same_user(peer: u32, own: u32) -> io::Result<()> {
    if peer == own {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("the takeover peer runs as uid {peer}, not {own}: refused"),
    ))
}

/// The user id of the process at the other end of `stream`.
fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let mut cred = libc::ucred {
        pid: 0,
        uid: 0,
        gid: 0,
    };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `cred`, which we own.
    let done = unsafe {
        libc::getsockopt(
            stream.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if done != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

/// Room for the control message of [`MAX_FDS`] descriptors.
fn control_space() -> usize {
    // SAFETY: CMSG_SPACE only computes a size.
    unsafe { libc::CMSG_SPACE((MAX_FDS * std::mem::size_of::<RawFd>()) as u32) as usize }
}

fn send_with_fds(socket: RawFd, bytes: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    if fds.len() > MAX_FDS {
        return Err(io::Error::other("too many descriptors for one message"));
    }
    let mut iov = libc::iovec {
        iov_base: bytes.as_ptr() as *mut libc::c_void,
        iov_len: bytes.len(),
    };
    // u64 storage keeps the control buffer aligned for cmsghdr.
    let mut control = vec![0u64; control_space().div_ceil(8)];
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    if !fds.is_empty() {
        let data_len = std::mem::size_of_val(fds);
        header.msg_control = control.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE only computes a size.
        header.msg_controllen = unsafe { libc::CMSG_SPACE(data_len as u32) } as _;
        // SAFETY: the control buffer holds CMSG_SPACE(data_len) bytes, so
        // the first header and its data fit in it.
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&header);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(data_len as u32) as _;
            std::ptr::copy_nonoverlapping(
                fds.as_ptr().cast::<u8>(),
                libc::CMSG_DATA(cmsg),
                data_len,
            );
        }
    }
    // SAFETY: the header points at buffers that live through the call.
    let sent = unsafe { libc::sendmsg(socket, &header, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sent as usize)
}

fn recv_with_fds(socket: RawFd, into: &mut [u8], fds: &mut Vec<OwnedFd>) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: into.as_mut_ptr().cast(),
        iov_len: into.len(),
    };
    let mut control = vec![0u64; control_space().div_ceil(8)];
    // SAFETY: msghdr is plain data; zeroed is a valid empty header.
    let mut header: libc::msghdr = unsafe { std::mem::zeroed() };
    header.msg_iov = &mut iov;
    header.msg_iovlen = 1;
    header.msg_control = control.as_mut_ptr().cast();
    header.msg_controllen = (control.len() * 8) as _;
    // SAFETY: the header points at buffers that live through the call.
    let read = unsafe { libc::recvmsg(socket, &mut header, libc::MSG_CMSG_CLOEXEC) };
    if read < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: walking the control messages the kernel wrote within
    // msg_controllen; each SCM_RIGHTS payload is an array of descriptors
    // now owned by this process.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(&header);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg);
                let bytes = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for index in 0..bytes / std::mem::size_of::<RawFd>() {
                    let fd = std::ptr::read_unaligned(
                        data.add(index * std::mem::size_of::<RawFd>())
                            .cast::<RawFd>(),
                    );
                    fds.push(OwnedFd::from_raw_fd(fd));
                }
            }
            cmsg = libc::CMSG_NXTHDR(&header, cmsg);
        }
    }
    if header.msg_flags & libc::MSG_CTRUNC != 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a takeover message carried more descriptors than expected",
        ));
    }
    Ok(read as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[tokio::test]
    async fn the_peer_of_another_user_is_refused() {
        let (a, _b) = UnixStream::pair().unwrap();
        // SAFETY: getuid cannot fail and touches no memory.
        let own = unsafe { libc::getuid() };
        assert_eq!(peer_uid(&a).unwrap(), own, "the kernel's credentials");
        assert!(same_user(own, own).is_ok());
        let refused = same_user(own + 1, own).unwrap_err();
        assert_eq!(refused.kind(), io::ErrorKind::PermissionDenied);
        assert!(refused
            .to_string()
            .contains(&format!("runs as uid {}, not {own}", own + 1)));
    }

    #[tokio::test]
    async fn messages_carry_descriptors_to_the_peer() {
        let (a, b) = UnixStream::pair().unwrap();
        let (a, mut b) = (Channel::new(a).unwrap(), Channel::new(b).unwrap());
        let (mut left, right) = std::os::unix::net::UnixStream::pair().unwrap();
        a.send(&serde_json::json!({"format": 1}), &[right.as_raw_fd()])
            .await
            .unwrap();
        a.send(&serde_json::json!({"next": "x".repeat(100_000)}), &[])
            .await
            .unwrap();
        drop(right);
        let (first, fds) = b.recv_value().await.unwrap();
        assert_eq!(first["format"], 1);
        assert_eq!(fds.len(), 1);
        let (second, none) = b.recv_value().await.unwrap();
        assert_eq!(second["next"].as_str().map(str::len), Some(100_000));
        assert!(none.is_empty());
        // The received descriptor is the same socket.
        let mut passed = std::os::unix::net::UnixStream::from(fds.into_iter().next().unwrap());
        passed.write_all(b"hi").unwrap();
        let mut got = [0u8; 2];
        left.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        drop(a);
        let closed = b.recv_value().await.unwrap_err();
        assert_eq!(closed.kind(), io::ErrorKind::UnexpectedEof);
    }
}
