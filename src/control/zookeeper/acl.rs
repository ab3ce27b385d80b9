//! How open the config document's znode is: the document holds the
//! backend and client passwords and says which hosts take writes, so a
//! znode anyone can change is refused (unless the process is told that is
//! intended: `--zk-allow-open-acl`), and one anyone can read is warned
//! about.

use zookeeper_client as zk;

/// What anyone who reaches the ensemble may do with a znode.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Openness {
    /// Anyone may change its data (or its ACL, which amounts to it).
    pub writable: bool,
    /// Anyone may read its data.
    pub readable: bool,
}

/// Whether an ACL entry names everyone: `world:anyone`, or an `ip` range
/// of every address.
fn names_everyone(acl: &zk::Acl) -> bool {
    match acl.scheme() {
        "world" => acl.id() == "anyone",
        "ip" => acl.id().ends_with("/0"),
        _ => false,
    }
}

impl Openness {
    /// The openness of a znode with these ACL entries.
    pub fn of(acls: &[zk::Acl]) -> Self {
        acls.iter()
            .filter(|acl| names_everyone(acl))
            .fold(Self::default(), |open, acl| {
                let permission = acl.permission();
                Self {
                    writable: open.writable
                        || permission.has(zk::Permission::WRITE)
                        || permission.has(zk::Permission::ADMIN),
                    readable: open.readable || permission.has(zk::Permission::READ),
                }
            })
    }
}

/// What to do about a config znode anyone can change: the refusal's text.
pub fn open_document_refusal(path: &str, creating: bool) -> String {
    let what = if creating {
        "this push would create the config znode {path} writable by anyone who can reach ZooKeeper \
         (no --zk-auth-file: its ACL would be world:anyone)"
            .replace("{path}", path)
    } else {
        format!(
            "the config znode {path} is writable by anyone who can reach ZooKeeper (its ACL gives \
             world:anyone write access)"
        )
    };
    format!(
        "{what}: anyone could add client accounts, read the backend password \
         or point shards at another host. Give it an ACL of your own: push it with credentials \
         (`shardgate config push FILE --source zookeeper://... --zk-auth-file FILE`, after deleting \
         the open znode, or `setAcl {path} digest:USER:HASH:cdrwa` in zkCli) and start every proxy \
         with the same --zk-auth-file; or, if an open document is intended (a test ensemble), pass \
         --zk-allow-open-acl (SHARDGATE_ZK_ALLOW_OPEN_ACL=1)"
    )
}

/// The warning for a config znode anyone can read.
pub fn readable_document_warning(path: &str) -> String {
    format!(
        "the config znode {path} is readable by anyone who can reach ZooKeeper: it holds the backend \
         and client passwords; give it an ACL of your own (--zk-auth-file)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn world_entries_decide() {
        assert_eq!(
            Openness::of(&zk::Acls::anyone_all()),
            Openness {
                writable: true,
                readable: true
            }
        );
        assert_eq!(
            Openness::of(&zk::Acls::anyone_read()),
            Openness {
                writable: false,
                readable: true
            }
        );
        assert_eq!(Openness::of(&zk::Acls::creator_all()), Openness::default());
        let digest = zk::Acl::new(zk::Permission::ALL, zk::AuthId::new("digest", "ops:hash"));
        assert_eq!(Openness::of(&[digest]), Openness::default());
        let admin = zk::Acl::new(zk::Permission::ADMIN, zk::AuthId::anyone());
        assert!(
            Openness::of(&[admin]).writable,
            "ADMIN lets anyone grant itself write"
        );
        let every_ip = zk::Acl::new(zk::Permission::WRITE, zk::AuthId::new("ip", "0.0.0.0/0"));
        assert!(Openness::of(&[every_ip]).writable);
        let one_ip = zk::Acl::new(zk::Permission::WRITE, zk::AuthId::new("ip", "10.0.0.1"));
        assert!(!Openness::of(&[one_ip]).writable);
    }
}
