//! Test certificates: a throwaway CA that signs server and client leaf certificates (rcgen).

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A CA that signs leaf certificates.
pub(crate) struct Ca {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A PEM certificate and key.
pub(crate) struct Leaf {
    pub cert: String,
    pub key: String,
}

impl Ca {
    pub(crate) fn new() -> Ca {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Distinct subject names: OpenSSL (redis-server) takes a leaf whose subject equals its
        // issuer for a self-signed certificate.
        params
            .distinguished_name
            .push(DnType::CommonName, "ratelimitd test CA");
        Ca {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap(),
        }
    }

    pub(crate) fn pem(&self) -> String {
        self.issuer.pem()
    }

    /// A leaf for `names` (DNS names or IP literals), for a client or a server.
    pub(crate) fn leaf(&self, names: &[&str], client: bool) -> Leaf {
        let mut params = CertificateParams::new(
            names
                .iter()
                .map(std::string::ToString::to_string)
                .collect::<Vec<_>>(),
        )
        .unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, names.first().copied().unwrap_or("leaf"));
        params.extended_key_usages = vec![if client {
            ExtendedKeyUsagePurpose::ClientAuth
        } else {
            ExtendedKeyUsagePurpose::ServerAuth
        }];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// A CA's files in a temp dir: `ca.crt`, `server.crt`/`server.key` and `client.crt`/`client.key`.
pub(crate) struct TlsFiles {
    pub dir: tempfile::TempDir,
}

impl TlsFiles {
    /// Files for a server certificate valid for `server_names`, signed by `ca`.
    pub(crate) fn new(ca: &Ca, server_names: &[&str]) -> TlsFiles {
        let files = TlsFiles {
            dir: tempfile::tempdir().unwrap(),
        };
        let server = ca.leaf(server_names, false);
        let client = ca.leaf(&["ratelimitd"], true);
        for (name, pem) in [
            ("ca.crt", ca.pem()),
            ("server.crt", server.cert),
            ("server.key", server.key),
            ("client.crt", client.cert),
            ("client.key", client.key),
        ] {
            std::fs::write(files.dir.path().join(name), pem).unwrap();
        }
        files
    }

    /// The path of one of the files.
    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }

    /// `redis-server` arguments serving these files (client certificates not required), TLS
    /// also towards replicas and, for a cluster node, on the cluster bus.
    pub(crate) fn server_args(&self) -> Vec<String> {
        let mut args: Vec<String> = [
            ("--tls-cert-file", "server.crt"),
            ("--tls-key-file", "server.key"),
            ("--tls-ca-cert-file", "ca.crt"),
            // As a client (replication, the cluster bus, which always asks for one).
            ("--tls-client-cert-file", "client.crt"),
            ("--tls-client-key-file", "client.key"),
        ]
        .iter()
        .flat_map(|(flag, file)| [flag.to_string(), self.path(file)])
        .collect();
        args.extend(["--tls-auth-clients", "no", "--tls-replication", "yes"].map(String::from));
        args
    }
}
