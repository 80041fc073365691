#!/usr/bin/env python3
"""A throwaway Sigstore instance for tests: a CA, a CT log and a Rekor log.

Test-only. kernhub verifies Sigstore bundles offline (docs/trust.md,
"How signatures are verified"); the fetch-path tests need bundles over files they make
themselves, signed by an instance whose trusted_root.json they control. This
script is that instance, with no servers: it plays Fulcio (issues short-lived
code-signing certificates), the CT log (embeds a signed certificate timestamp
in each certificate) and Rekor (appends each signature to a Merkle tree, signs
an entry timestamp and a checkpoint) in one process, and writes the bundle a
real Sigstore client would receive. Every key it makes is generated on the
spot, lives in the instance directory and protects nothing.

  init DIR
      Makes DIR/ with:
        trusted_root.json   Sigstore's format (media type
                            application/vnd.dev.sigstore.trustedroot+json;version=0.1):
                            one tlog (the Rekor key), one CA (intermediate and
                            root, as Fulcio publishes them), one ctlog, no
                            timestamp authorities. Every validFor starts in the past.
        keys/*.pem          the private keys (CA root and intermediate ECDSA
                            P-384 as Fulcio; CT log and Rekor ECDSA P-256)
        ca_*.der            the CA certificates
        log.json            the Rekor log state: its leaves (leaf hashes), so
                            successive entries get increasing logIndex and the
                            inclusion proofs run through a tree of several leaves.
        instance.json       names and settings (origin, shard offset)
        tsa.der, keys/tsa.pem  the TSA signer (init --tsa only)

  sign DIR ARTIFACT --out BUNDLE --identity ID --issuer URL
       [--repository URI] [--bundle-version 0.1|0.2|0.3] [--fault NAME]...
      Signs ARTIFACT as a keyless Sigstore client would: an ephemeral ECDSA
      P-256 key, a leaf certificate like Fulcio's (10 minutes, code signing,
      the identity as SAN URI, or email when it has an @ and no scheme; OIDC
      issuer in extensions 1.3.6.1.4.1.57264.1.1 (raw) and .1.8 (UTF8String),
      .1.9 build signer URI = identity, .1.12 source repository; an embedded
      SCT over the precertificate), an ECDSA signature over the artifact's
      SHA-256, a hashedrekord 0.0.1 entry appended to the log with its signed
      entry timestamp (SET), an RFC 6962 inclusion proof and a checkpoint in
      signed-note form. Bundle v0.3 carries verificationMaterial.certificate,
      v0.1 and v0.2 an x509CertificateChain of the leaf.

  Faults (--fault, repeatable): each makes exactly one thing wrong and keeps
  every other part valid, so a verifier must reject the bundle at that step:
    expired         the leaf's validity ends before the log's integrated time
                    (the certificate, SCT, SET and proof all verify)
    premature       the leaf's validity starts after the integrated time
    no-sct          the leaf carries no SCT extension
    bad-sct         the SCT's signature does not cover this precertificate
    bad-set         the SET does not verify over the entry
    no-set          the entry has no inclusion promise (SET)
    bad-proof       one hash of the inclusion proof is wrong
    no-proof        the entry has no inclusion proof (valid in v0.1 only)
    bad-checkpoint  the checkpoint's signature does not verify
    body-mismatch   the logged body is for another digest and signature,
                    validly logged (the CVE-2022-36056 shape)
    wrong-key       the artifact signature is made by a key other than the
                    certificate's (and logged as such)
    digest-mismatch the bundle's messageDigest is not the artifact's SHA-256
    untrusted-ca    the leaf comes from a CA that is not in the trusted root
                    (SCT and log entry valid for it)
    dsse            a DSSE envelope (in-toto statement over the artifact)
                    logged as a dsse 0.0.1 entry, instead of a message signature
    untrusted-tsa   an RFC 3161 timestamp (as --timestamp) from a TSA that the
                    trusted root does not list
    ca-leaf         the leaf is a CA certificate (basicConstraints CA:true)
    no-digital-signature  the leaf's key usage is keyCertSign, not digitalSignature
    two-sans        the leaf names a second identity besides the real one
    issuer-mismatch the legacy issuer extension (.1.1) names another issuer
                    than .1.8

  Timestamps: `init --tsa` also makes a timestamp authority (P-256 root and a
  signer with the critical timeStamping EKU) listed in timestampAuthorities;
  `sign --timestamp` adds verificationMaterial.timestampVerificationData
  with one RFC 3161 response over the signature (a CMS SignedData token with
  an ESS signingCertificateV2 attribute), from that TSA or, in an instance
  without one, from a throwaway TSA. With the fault no-set, the timestamp is
  the bundle's only signed time (the shape of bundles from a log without SETs).
  `init --backdate-days N` starts every validity window N days ago (default
  1), for roots whose newest key is old.

Importable: Instance.init(dir), Instance(dir).sign(...) returns the bundle as
a dict. Needs the `cryptography` package (the sigstore package pinned in
tests/requirements.txt brings it).
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import fcntl
import hashlib
import json
import os
import secrets
import struct
import sys
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID, ObjectIdentifier

TRUSTED_ROOT_MEDIA_TYPE = "application/vnd.dev.sigstore.trustedroot+json;version=0.1"
BUNDLE_MEDIA_TYPES = {
    "0.1": "application/vnd.dev.sigstore.bundle+json;version=0.1",
    "0.2": "application/vnd.dev.sigstore.bundle+json;version=0.2",
    "0.3": "application/vnd.dev.sigstore.bundle.v0.3+json",
}
FAULTS = (
    "expired",
    "premature",
    "no-sct",
    "bad-sct",
    "bad-set",
    "no-set",
    "bad-proof",
    "no-proof",
    "bad-checkpoint",
    "body-mismatch",
    "wrong-key",
    "digest-mismatch",
    "untrusted-ca",
    "dsse",
    "untrusted-tsa",
    "ca-leaf",
    "no-digital-signature",
    "two-sans",
    "issuer-mismatch",
)

OID_ISSUER_V1 = ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
OID_ISSUER_V2 = ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
OID_BUILD_SIGNER_URI = ObjectIdentifier("1.3.6.1.4.1.57264.1.9")
OID_SOURCE_REPOSITORY_URI = ObjectIdentifier("1.3.6.1.4.1.57264.1.12")
OID_SCT_LIST = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")

LEAF_LIFETIME = dt.timedelta(minutes=10)  # as Fulcio
CA_LIFETIME = dt.timedelta(days=3650)
# Keys and CAs are valid from a while back, so validFor.start is in the past
# and a certificate issued now lies well inside every window.
BACKDATE = dt.timedelta(days=1)
# Entries other signers append around each of ours, so inclusion proofs run
# through inner and right-border nodes of a tree of several leaves.
LOG_SEED_LEAVES = 5
LOG_LEAVES_AFTER = 2


# --- encodings --------------------------------------------------------------


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def rfc3339(t: dt.datetime) -> str:
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def canonical_json(obj) -> bytes:
    """Sorted keys, no spaces: Rekor's canonical form for bodies and SETs."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def der_utf8(text: str) -> bytes:
    data = text.encode()
    return b"\x0c" + der_length(len(data)) + data


def der_octets(data: bytes) -> bytes:
    return b"\x04" + der_length(len(data)) + data


def der_tlv(tag: int, content: bytes) -> bytes:
    return bytes([tag]) + der_length(len(content)) + content


def der_seq(*items: bytes) -> bytes:
    return der_tlv(0x30, b"".join(items))


def der_set(*items: bytes) -> bytes:
    return der_tlv(0x31, b"".join(sorted(items)))  # DER sorts SET OF


def der_int(n: int) -> bytes:
    return der_tlv(0x02, n.to_bytes(n.bit_length() // 8 + 1, "big", signed=True))


def der_oid(dotted: str) -> bytes:
    arcs = [int(a) for a in dotted.split(".")]
    body = bytearray([40 * arcs[0] + arcs[1]])
    for arc in arcs[2:]:
        chunk = [arc & 0x7F]
        arc >>= 7
        while arc:
            chunk.append(0x80 | (arc & 0x7F))
            arc >>= 7
        body += bytes(reversed(chunk))
    return der_tlv(0x06, bytes(body))


def spki_der(key) -> bytes:
    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def key_id(key) -> bytes:
    """RFC 6962 key id: SHA-256 of the DER SubjectPublicKeyInfo."""
    return hashlib.sha256(spki_der(key)).digest()


def cert_pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def cert_der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def ecdsa_sign(key, data: bytes) -> bytes:
    algorithm = hashes.SHA384() if key.curve.key_size == 384 else hashes.SHA256()
    return key.sign(data, ec.ECDSA(algorithm))


# --- RFC 6962 Merkle tree ------------------------------------------------------


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(b"\x01" + left + right).digest()


def split_point(n: int) -> int:
    """The largest power of two smaller than n (n > 1)."""
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def tree_hash(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = split_point(len(leaves))
    return node_hash(tree_hash(leaves[:k]), tree_hash(leaves[k:]))


def audit_path(index: int, leaves: list[bytes]) -> list[bytes]:
    """RFC 6962 PATH(m, D[n]), leaf level first."""
    if len(leaves) <= 1:
        return []
    k = split_point(len(leaves))
    if index < k:
        return audit_path(index, leaves[:k]) + [tree_hash(leaves[k:])]
    return audit_path(index - k, leaves[k:]) + [tree_hash(leaves[:k])]


# --- the instance -----------------------------------------------------------------


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "kernhub.test"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def make_ca(label: str, not_before: dt.datetime):
    """A Fulcio-shaped CA: a P-384 root and a P-384 intermediate (pathlen 0,
    code-signing EKU). Returns (root_key, root_cert, inter_key, inter_cert)."""
    root_key = ec.generate_private_key(ec.SECP384R1())
    inter_key = ec.generate_private_key(ec.SECP384R1())
    not_after = not_before + CA_LIFETIME
    ca_usage = x509.KeyUsage(
        digital_signature=False,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=True,
        crl_sign=True,
        encipher_only=False,
        decipher_only=False,
    )
    root_name = _name(f"{label} root")
    root_ski = x509.SubjectKeyIdentifier.from_public_key(root_key.public_key())
    root = (
        x509.CertificateBuilder()
        .subject_name(root_name)
        .issuer_name(root_name)
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(ca_usage, critical=True)
        .add_extension(x509.BasicConstraints(ca=True, path_length=1), critical=True)
        .add_extension(root_ski, critical=False)
        .sign(root_key, hashes.SHA384())
    )
    inter_name = _name(f"{label} intermediate")
    inter = (
        x509.CertificateBuilder()
        .subject_name(inter_name)
        .issuer_name(root_name)
        .public_key(inter_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(ca_usage, critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(inter_key.public_key()), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(root_ski), critical=False)
        .sign(root_key, hashes.SHA384())
    )
    return root_key, root, inter_key, inter


def make_tsa(label: str, not_before: dt.datetime):
    """A timestamp authority: a P-256 root and a signing leaf with the
    critical timeStamping EKU. Returns (root_key, root_cert, leaf_key, leaf_cert)."""
    root_key = ec.generate_private_key(ec.SECP256R1())
    leaf_key = ec.generate_private_key(ec.SECP256R1())
    not_after = not_before + CA_LIFETIME
    root_name = _name(f"{label} root")
    root_ski = x509.SubjectKeyIdentifier.from_public_key(root_key.public_key())
    usage = dict(
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )
    root = (
        x509.CertificateBuilder()
        .subject_name(root_name)
        .issuer_name(root_name)
        .public_key(root_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.KeyUsage(digital_signature=False, key_cert_sign=True, **usage), critical=True)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(root_ski, critical=False)
        .sign(root_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{label} signer"))
        .issuer_name(root_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=False, **usage), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.TIME_STAMPING]), critical=True)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(root_ski), critical=False)
        .sign(root_key, hashes.SHA256())
    )
    return root_key, root, leaf_key, leaf


OID_SHA256 = "2.16.840.1.101.3.4.2.1"
OID_ECDSA_SHA256 = "1.2.840.10045.4.3.2"
OID_SIGNED_DATA = "1.2.840.113549.1.7.2"
OID_TST_INFO = "1.2.840.113549.1.9.16.1.4"
OID_ATTR_CONTENT_TYPE = "1.2.840.113549.1.9.3"
OID_ATTR_MESSAGE_DIGEST = "1.2.840.113549.1.9.4"
OID_ATTR_SIGNING_CERTIFICATE_V2 = "1.2.840.113549.1.9.16.2.47"
OID_TSA_POLICY = "1.3.6.1.4.1.57264.99.1"  # an arbitrary policy of this test TSA


def rfc3161_response(tsa_key, tsa_cert, message: bytes, gen_time: dt.datetime) -> bytes:
    """An RFC 3161 TimeStampResp (status granted) whose token (CMS
    SignedData over a TSTInfo, signed attributes with the ESS
    signingCertificateV2, the TSA certificate included) stamps SHA-256(message)."""
    sha256 = der_seq(der_oid(OID_SHA256))
    tst_info = der_seq(
        der_int(1),
        der_oid(OID_TSA_POLICY),
        der_seq(sha256, der_octets(hashlib.sha256(message).digest())),
        der_int(x509.random_serial_number()),
        der_tlv(0x18, gen_time.astimezone(dt.timezone.utc).strftime("%Y%m%d%H%M%SZ").encode()),
    )
    cert = cert_der(tsa_cert)
    attrs = [
        der_seq(der_oid(OID_ATTR_CONTENT_TYPE), der_set(der_oid(OID_TST_INFO))),
        der_seq(der_oid(OID_ATTR_MESSAGE_DIGEST), der_set(der_octets(hashlib.sha256(tst_info).digest()))),
        der_seq(
            der_oid(OID_ATTR_SIGNING_CERTIFICATE_V2),
            der_set(der_seq(der_seq(der_seq(der_octets(hashlib.sha256(cert).digest()))))),
        ),
    ]
    signed_attrs = der_set(*attrs)  # signed as a SET, carried as [0] IMPLICIT
    signature = tsa_key.sign(signed_attrs, ec.ECDSA(hashes.SHA256()))
    signer_info = der_seq(
        der_int(1),
        der_seq(tsa_cert.issuer.public_bytes(), der_int(tsa_cert.serial_number)),
        sha256,
        b"\xa0" + signed_attrs[1:],
        der_seq(der_oid(OID_ECDSA_SHA256)),
        der_octets(signature),
    )
    signed_data = der_seq(
        der_int(3),
        der_set(sha256),
        der_seq(der_oid(OID_TST_INFO), der_tlv(0xA0, der_octets(tst_info))),
        der_tlv(0xA0, cert),
        der_set(signer_info),
    )
    token = der_seq(der_oid(OID_SIGNED_DATA), der_tlv(0xA0, signed_data))
    return der_seq(der_seq(der_int(0)), token)


def _write_key(path: Path, key) -> None:
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )


def _read_key(path: Path):
    return serialization.load_pem_private_key(path.read_bytes(), password=None)


def _tlog_json(base_url: str, key, start: dt.datetime) -> dict:
    return {
        "baseUrl": base_url,
        "hashAlgorithm": "SHA2_256",
        "publicKey": {
            "rawBytes": b64(spki_der(key.public_key())),
            "keyDetails": "PKIX_ECDSA_P256_SHA_256",
            "validFor": {"start": rfc3339(start)},
        },
        "logId": {"keyId": b64(key_id(key.public_key()))},
    }


class Instance:
    """A test Sigstore instance stored in a directory (see the module docstring)."""

    def __init__(self, directory):
        self.dir = Path(directory)
        meta = json.loads((self.dir / "instance.json").read_text())
        self.origin = meta["origin"]
        self.shard_offset = int(meta["shard_offset"])
        keys = self.dir / "keys"
        self.ca_key = _read_key(keys / "ca_intermediate.pem")
        self.ct_key = _read_key(keys / "ctlog.pem")
        self.rekor_key = _read_key(keys / "rekor.pem")
        self.ca_cert = x509.load_der_x509_certificate((self.dir / "ca_intermediate.der").read_bytes())
        self.root_cert = x509.load_der_x509_certificate((self.dir / "ca_root.der").read_bytes())
        self.tsa = None
        if (keys / "tsa.pem").exists():
            tsa_cert = x509.load_der_x509_certificate((self.dir / "tsa.der").read_bytes())
            self.tsa = (_read_key(keys / "tsa.pem"), tsa_cert)

    @property
    def trusted_root_path(self) -> Path:
        return self.dir / "trusted_root.json"

    @classmethod
    def init(cls, directory, shard_offset: int = 0, with_tsa: bool = False, backdate_days: float = 1) -> "Instance":
        d = Path(directory)
        (d / "keys").mkdir(parents=True, exist_ok=True)
        start = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) - dt.timedelta(days=backdate_days)
        root_key, root, inter_key, inter = make_ca("kernhub test fulcio", start)
        ct_key = ec.generate_private_key(ec.SECP256R1())
        rekor_key = ec.generate_private_key(ec.SECP256R1())
        _write_key(d / "keys" / "ca_root.pem", root_key)
        _write_key(d / "keys" / "ca_intermediate.pem", inter_key)
        _write_key(d / "keys" / "ctlog.pem", ct_key)
        _write_key(d / "keys" / "rekor.pem", rekor_key)
        (d / "ca_root.der").write_bytes(cert_der(root))
        (d / "ca_intermediate.der").write_bytes(cert_der(inter))
        trusted_root = {
            "mediaType": TRUSTED_ROOT_MEDIA_TYPE,
            "tlogs": [_tlog_json("https://rekor.kernhub.test", rekor_key, start)],
            "certificateAuthorities": [
                {
                    "subject": {"organization": "kernhub.test", "commonName": "kernhub test fulcio"},
                    "uri": "https://fulcio.kernhub.test",
                    "certChain": {
                        "certificates": [{"rawBytes": b64(cert_der(inter))}, {"rawBytes": b64(cert_der(root))}]
                    },
                    "validFor": {"start": rfc3339(start)},
                }
            ],
            "ctlogs": [_tlog_json("https://ctfe.kernhub.test", ct_key, start)],
            "timestampAuthorities": [],
        }
        if with_tsa:
            _, tsa_root, tsa_key, tsa_leaf = make_tsa("kernhub test tsa", start)
            _write_key(d / "keys" / "tsa.pem", tsa_key)
            (d / "tsa.der").write_bytes(cert_der(tsa_leaf))
            trusted_root["timestampAuthorities"].append(
                {
                    "subject": {"organization": "kernhub.test", "commonName": "kernhub test tsa"},
                    "uri": "https://tsa.kernhub.test/api/v1/timestamp",
                    "certChain": {
                        "certificates": [{"rawBytes": b64(cert_der(tsa_leaf))}, {"rawBytes": b64(cert_der(tsa_root))}]
                    },
                    "validFor": {"start": rfc3339(start)},
                }
            )
        (d / "trusted_root.json").write_text(json.dumps(trusted_root, indent=2) + "\n")
        tree_id = int.from_bytes(secrets.token_bytes(7), "big")
        meta = {"origin": f"rekor.kernhub.test - {tree_id}", "shard_offset": shard_offset}
        (d / "instance.json").write_text(json.dumps(meta, indent=2) + "\n")
        seed = [leaf_hash(b"seed entry %d" % i).hex() for i in range(LOG_SEED_LEAVES)]
        (d / "log.json").write_text(json.dumps({"leaves": seed}) + "\n")
        return cls(d)

    # --- Fulcio and the CT log ----------------------------------------------------

    def _leaf_builder(self, public_key, issuer_cert, identity, issuer_url, repository, not_before, not_after,
                      faults=()):
        if "@" in identity and "://" not in identity:
            san = x509.RFC822Name(identity)
        else:
            san = x509.UniformResourceIdentifier(identity)
        sans = [san, x509.UniformResourceIdentifier("https://example.com/another")] if "two-sans" in faults else [san]
        signs = "no-digital-signature" not in faults
        issuer_v1 = "https://issuer.example" if "issuer-mismatch" in faults else issuer_url
        issuer_ski = issuer_cert.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([]))
            .issuer_name(issuer_cert.subject)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=signs,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=not signs,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False)
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(issuer_ski), critical=False)
            .add_extension(x509.SubjectAlternativeName(sans), critical=True)
            .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V1, issuer_v1.encode()), critical=False)
            .add_extension(x509.UnrecognizedExtension(OID_ISSUER_V2, der_utf8(issuer_url)), critical=False)
        )
        if "ca-leaf" in faults:
            builder = builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        if "://" in identity:
            builder = builder.add_extension(
                x509.UnrecognizedExtension(OID_BUILD_SIGNER_URI, der_utf8(identity)), critical=False
            )
        if repository:
            builder = builder.add_extension(
                x509.UnrecognizedExtension(OID_SOURCE_REPOSITORY_URI, der_utf8(repository)), critical=False
            )
        return builder

    def _sct(self, issuer_cert, tbs: bytes, timestamp_ms: int, corrupt: bool) -> bytes:
        """One RFC 6962 SCT (v1, precert_entry) over issuer key hash + TBS."""
        issuer_key_hash = key_id(issuer_cert.public_key())
        extensions = b""
        signed_ts = timestamp_ms + 1 if corrupt else timestamp_ms
        signed = (
            struct.pack("!BBQH", 0, 0, signed_ts, 1)
            + issuer_key_hash
            + len(tbs).to_bytes(3, "big")
            + tbs
            + struct.pack("!H", len(extensions))
            + extensions
        )
        signature = ecdsa_sign(self.ct_key, signed)
        return (
            struct.pack("!B", 0)
            + key_id(self.ct_key.public_key())
            + struct.pack("!Q", timestamp_ms)
            + struct.pack("!H", len(extensions))
            + extensions
            + struct.pack("!BBH", 4, 3, len(signature))  # sha256, ecdsa
            + signature
        )

    def issue_leaf(self, public_key, identity, issuer_url, repository, not_before, not_after, faults, ca=None):
        """A Fulcio-like leaf: precertificate TBS -> SCT -> final certificate
        whose TBS, minus the SCT extension, is the precertificate's."""
        ca_key, ca_cert = ca if ca else (self.ca_key, self.ca_cert)
        builder = self._leaf_builder(public_key, ca_cert, identity, issuer_url, repository, not_before, not_after,
                                     faults)
        if "no-sct" in faults:
            return builder.sign(ca_key, hashes.SHA384())
        precert = builder.sign(ca_key, hashes.SHA384())
        sct = self._sct(ca_cert, precert.tbs_certificate_bytes, int(not_before.timestamp() * 1000), "bad-sct" in faults)
        sct_list = struct.pack("!H", len(sct) + 2) + struct.pack("!H", len(sct)) + sct
        leaf = builder.add_extension(
            x509.UnrecognizedExtension(OID_SCT_LIST, der_octets(sct_list)), critical=False
        ).sign(ca_key, hashes.SHA384())
        if leaf.tbs_precertificate_bytes != precert.tbs_certificate_bytes:
            raise RuntimeError("the leaf's TBS without its SCT differs from the precertificate's")
        return leaf

    # --- Rekor -------------------------------------------------------------------

    def _append(self, body: bytes) -> tuple[int, list[bytes]]:
        """Appends body's leaf (and a few leaves of other signers) under a
        lock; returns the entry's index in the tree and the tree's leaves."""
        with open(self.dir / "log.json", "r+") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            state = json.load(f)
            leaves = state["leaves"]
            index = len(leaves)
            leaves.append(leaf_hash(body).hex())
            for i in range(LOG_LEAVES_AFTER):
                leaves.append(leaf_hash(b"other entry %d.%d" % (index, i)).hex())
            f.seek(0)
            f.truncate()
            json.dump(state, f)
            f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        return index, [bytes.fromhex(h) for h in leaves]

    def _checkpoint(self, size: int, root: bytes, corrupt: bool) -> str:
        note = f"{self.origin}\n{size}\n{b64(root)}\n"
        signed = f"{self.origin}\n{size + 1}\n{b64(root)}\n" if corrupt else note
        signature = ecdsa_sign(self.rekor_key, signed.encode())
        hint = key_id(self.rekor_key.public_key())[:4]
        name = self.origin.split(" ")[0]
        return f"{note}\n\u2014 {name} {b64(hint + signature)}\n"

    def log_entry(self, body: bytes, kind: str, integrated_time: int, faults) -> dict:
        tree_index, leaves = self._append(body)
        log_index = tree_index + self.shard_offset
        log_id = key_id(self.rekor_key.public_key())
        set_payload = {
            "body": b64(body),
            "integratedTime": integrated_time + (1 if "bad-set" in faults else 0),
            "logID": log_id.hex(),
            "logIndex": log_index,
        }
        set_signature = ecdsa_sign(self.rekor_key, canonical_json(set_payload))
        root = tree_hash(leaves)
        path = audit_path(tree_index, leaves)
        if "bad-proof" in faults:
            path[0] = hashlib.sha256(b"not a node of this tree").digest()
        entry = {
            "logIndex": str(log_index),
            "logId": {"keyId": b64(log_id)},
            "kindVersion": {"kind": kind, "version": "0.0.1"},
            "integratedTime": str(integrated_time),
            "inclusionPromise": {"signedEntryTimestamp": b64(set_signature)},
            "inclusionProof": {
                "logIndex": str(tree_index),
                "rootHash": b64(root),
                "treeSize": str(len(leaves)),
                "hashes": [b64(h) for h in path],
                "checkpoint": {"envelope": self._checkpoint(len(leaves), root, "bad-checkpoint" in faults)},
            },
            "canonicalizedBody": b64(body),
        }
        if "no-set" in faults:
            del entry["inclusionPromise"]
        if "no-proof" in faults:
            del entry["inclusionProof"]
        return entry

    # --- the client ----------------------------------------------------------------

    def sign(
        self,
        artifact: bytes,
        identity: str,
        issuer: str,
        repository: str = "",
        bundle_version: str = "0.3",
        faults=(),
        timestamp: bool = False,
    ) -> dict:
        faults = set(faults)
        unknown = faults - set(FAULTS)
        if unknown:
            raise ValueError(f"unknown faults {sorted(unknown)}; known: {', '.join(FAULTS)}")
        if bundle_version not in BUNDLE_MEDIA_TYPES:
            raise ValueError(f"unknown bundle version {bundle_version}; known: {', '.join(BUNDLE_MEDIA_TYPES)}")

        now = dt.datetime.now(dt.timezone.utc).replace(microsecond=0)
        integrated_time = int(now.timestamp())
        not_before = now - dt.timedelta(seconds=5)
        if "expired" in faults:
            not_before = now - 2 * LEAF_LIFETIME
        if "premature" in faults:
            not_before = now + dt.timedelta(minutes=2)
        not_after = not_before + LEAF_LIFETIME

        key = ec.generate_private_key(ec.SECP256R1())
        ca = None
        if "untrusted-ca" in faults:
            _, _, other_key, other_cert = make_ca("kernhub untrusted fulcio", now - BACKDATE)
            ca = (other_key, other_cert)
        leaf = self.issue_leaf(key.public_key(), identity, issuer, repository, not_before, not_after, faults, ca)
        leaf_pem_b64 = b64(cert_pem(leaf))

        digest = hashlib.sha256(artifact).digest()
        if "dsse" in faults:
            bundle = self._sign_dsse(key, leaf, digest, integrated_time, bundle_version, faults)
            if timestamp or "untrusted-tsa" in faults:
                dsse_signature = base64.b64decode(bundle["dsseEnvelope"]["signatures"][0]["sig"])
                self._add_timestamp(bundle, dsse_signature, now, faults)
            return bundle

        signer = ec.generate_private_key(ec.SECP256R1()) if "wrong-key" in faults else key
        signature = signer.sign(digest, ec.ECDSA(Prehashed(hashes.SHA256())))

        logged_digest, logged_signature = digest, signature
        if "body-mismatch" in faults:
            logged_digest = hashlib.sha256(artifact + b" (another artifact)").digest()
            logged_signature = key.sign(logged_digest, ec.ECDSA(Prehashed(hashes.SHA256())))
        body = canonical_json(
            {
                "apiVersion": "0.0.1",
                "kind": "hashedrekord",
                "spec": {
                    "data": {"hash": {"algorithm": "sha256", "value": logged_digest.hex()}},
                    "signature": {"content": b64(logged_signature), "publicKey": {"content": leaf_pem_b64}},
                },
            }
        )
        entry = self.log_entry(body, "hashedrekord", integrated_time, faults)

        bundle_digest = hashlib.sha256(digest).digest() if "digest-mismatch" in faults else digest
        bundle = self._bundle(leaf, entry, bundle_version)
        bundle["messageSignature"] = {
            "messageDigest": {"algorithm": "SHA2_256", "digest": b64(bundle_digest)},
            "signature": b64(signature),
        }
        if timestamp or "untrusted-tsa" in faults:
            self._add_timestamp(bundle, signature, now, faults)
        return bundle

    def _add_timestamp(self, bundle: dict, signature: bytes, now: dt.datetime, faults) -> None:
        """An RFC 3161 timestamp over the signature, from the instance's TSA
        (init --tsa), else (or with the fault untrusted-tsa) from a throwaway
        TSA that no root lists."""
        if self.tsa and "untrusted-tsa" not in faults:
            tsa_key, tsa_cert = self.tsa
        else:
            _, _, tsa_key, tsa_cert = make_tsa("kernhub untrusted tsa", now - BACKDATE)
        response = rfc3161_response(tsa_key, tsa_cert, signature, now)
        bundle["verificationMaterial"]["timestampVerificationData"] = {
            "rfc3161Timestamps": [{"signedTimestamp": b64(response)}]
        }

    def _sign_dsse(self, key, leaf, digest: bytes, integrated_time: int, bundle_version: str, faults) -> dict:
        payload_type = "application/vnd.in-toto+json"
        statement = {
            "_type": "https://in-toto.io/Statement/v1",
            "subject": [{"name": "artifact", "digest": {"sha256": digest.hex()}}],
            "predicateType": "https://kernhub.test/predicate/v1",
            "predicate": {},
        }
        payload = canonical_json(statement)
        pae = b"DSSEv1 %d %s %d %s" % (len(payload_type), payload_type.encode(), len(payload), payload)
        signature = key.sign(pae, ec.ECDSA(hashes.SHA256()))
        envelope = {
            "payload": b64(payload),
            "payloadType": payload_type,
            "signatures": [{"sig": b64(signature), "keyid": ""}],
        }
        body = canonical_json(
            {
                "apiVersion": "0.0.1",
                "kind": "dsse",
                "spec": {
                    "envelopeHash": {
                        "algorithm": "sha256",
                        "value": hashlib.sha256(canonical_json(envelope)).hexdigest(),
                    },
                    "payloadHash": {"algorithm": "sha256", "value": hashlib.sha256(payload).hexdigest()},
                    "signatures": [{"signature": b64(signature), "verifier": b64(cert_pem(leaf))}],
                },
            }
        )
        entry = self.log_entry(body, "dsse", integrated_time, faults)
        bundle = self._bundle(leaf, entry, bundle_version)
        bundle["dsseEnvelope"] = envelope
        return bundle

    @staticmethod
    def _bundle(leaf, entry: dict, bundle_version: str) -> dict:
        material: dict = {}
        if bundle_version == "0.3":
            material["certificate"] = {"rawBytes": b64(cert_der(leaf))}
        else:
            material["x509CertificateChain"] = {"certificates": [{"rawBytes": b64(cert_der(leaf))}]}
        material["tlogEntries"] = [entry]
        return {"mediaType": BUNDLE_MEDIA_TYPES[bundle_version], "verificationMaterial": material}


# --- command line -------------------------------------------------------------------


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="A throwaway Sigstore instance for tests (see the docstring).")
    sub = parser.add_subparsers(dest="command", required=True)
    p_init = sub.add_parser("init", help="make a CA, CT log and Rekor keys and DIR/trusted_root.json")
    p_init.add_argument("dir")
    p_init.add_argument(
        "--shard-offset",
        type=int,
        default=0,
        help="add this to each entry's logIndex (the proof's index stays the tree's), as a sharded Rekor does",
    )
    p_init.add_argument("--tsa", action="store_true", help="also make a timestamp authority, listed in the root")
    p_init.add_argument(
        "--backdate-days", type=float, default=1, help="every key and CA is valid from this many days ago (default 1)"
    )
    p_sign = sub.add_parser("sign", help="sign ARTIFACT into a Sigstore bundle")
    p_sign.add_argument("dir")
    p_sign.add_argument("artifact")
    p_sign.add_argument("--out", required=True)
    p_sign.add_argument("--identity", required=True)
    p_sign.add_argument("--issuer", required=True)
    p_sign.add_argument("--repository", default="")
    p_sign.add_argument("--bundle-version", choices=sorted(BUNDLE_MEDIA_TYPES), default="0.3")
    p_sign.add_argument("--fault", action="append", default=[], choices=FAULTS)
    p_sign.add_argument(
        "--timestamp",
        action="store_true",
        help="add an RFC 3161 timestamp over the signature (the instance's TSA, else one no root lists)",
    )
    args = parser.parse_args(argv)

    if args.command == "init":
        Instance.init(args.dir, args.shard_offset, args.tsa, args.backdate_days)
        return 0
    instance = Instance(args.dir)
    bundle = instance.sign(
        Path(args.artifact).read_bytes(),
        identity=args.identity,
        issuer=args.issuer,
        repository=args.repository,
        bundle_version=args.bundle_version,
        faults=args.fault,
        timestamp=args.timestamp,
    )
    out = Path(args.out)
    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(bundle, indent=2) + "\n")
    os.replace(tmp, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
