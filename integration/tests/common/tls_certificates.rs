//! A throwaway CA and a server certificate signed by it, for the tests of
//! TLS towards clients.

use std::path::Path;

/// A CA and a server certificate for localhost / 127.0.0.1 signed by it.
pub fn write_certificates(dir: &Path) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let ca_key = KeyPair::generate().expect("CA key");
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "shardgate test CA");
    let ca_cert = ca_params.self_signed(&ca_key).expect("CA cert");
    let issuer = Issuer::new(ca_params, ca_key);

    let key = KeyPair::generate().expect("server key");
    let mut params = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("server params");
    params
        .distinguished_name
        .push(DnType::CommonName, "shardgate test server");
    let cert = params.signed_by(&key, &issuer).expect("server cert");

    std::fs::write(dir.join("ca.pem"), ca_cert.pem()).expect("write CA");
    // The chain as servers usually ship it: leaf, then the CA.
    std::fs::write(
        dir.join("server.pem"),
        format!("{}{}", cert.pem(), ca_cert.pem()),
    )
    .expect("write cert");
    std::fs::write(dir.join("server.key"), key.serialize_pem()).expect("write key");
}
