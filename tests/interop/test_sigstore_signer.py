#!/usr/bin/env python3
"""Interop: the test Sigstore instance (tests/support/sigstore_signer.py)
makes bundles that the real sigstore-python verifier accepts, and each of its
faults breaks exactly the part it names.

The fetch-path tests of kernhub's signature checks sign variants with that
instance; this script is what makes their bundles trustworthy as test input.
With sigstore-python (pinned in tests/requirements.txt, run with
KERNHUB_TEST_PYTHON) it checks:
  - `init` writes a trusted_root.json that sigstore-python loads, whose log
    ids are the SHA-256 of the keys and whose validity windows started;
  - `sign` bundles of media types v0.1, v0.2 and v0.3, for a URI identity
    with a source repository and for an email identity, pass
    Verifier.verify_artifact with the instance's root and an Identity policy
    (plus the .1.8 issuer and .1.12 repository policies), also from an
    instance whose logIndex is offset from the tree index as a sharded Rekor's;
  - successive entries get increasing log indexes in a growing tree;
  - a changed artifact, another identity and another issuer are rejected;
  - every fault is rejected by verify_artifact, and sigstore-python's own
    step functions (chain, validity at log time, SCT, SET, inclusion proof,
    checkpoint, signature, digest, log body) fail exactly the one the fault
    names and pass all others; the dsse fault passes verify_dsse;
  - no-set and no-proof are refused by sigstore-python's bundle parser;
  - timestamps: with `init --tsa`, sigstore-python verifies the RFC 3161
    timestamp of `sign --timestamp` and accepts bundles whose only signed
    time it is (no SET); it verifies no timestamp of the fault untrusted-tsa
    (accepted with a SET, rejected without); a root without TSAs rejects a
    timestamped bundle; a root backdated 400 days still verifies.
Exit 77 (skipped) when this interpreter lacks sigstore.
"""

import argparse
import base64
import hashlib
import json
import subprocess
import sys
import tempfile
from datetime import timedelta
from pathlib import Path

import interop_support as support

IDENTITY = "https://github.com/kernels-community/relu/.github/workflows/build.yaml@refs/heads/main"
ISSUER = "https://token.actions.githubusercontent.com"
REPOSITORY = "https://github.com/kernels-community/relu"
EMAIL = "builder@kernhub.test"
EMAIL_ISSUER = "https://accounts.google.com"

# The fault -> the one step of sigstore-python it must fail (see steps()).
FAULT_STEP = {
    "expired": "validity",
    "premature": "validity",
    "no-sct": "sct",
    "bad-sct": "sct",
    "bad-set": "set",
    "bad-proof": "proof",
    "bad-checkpoint": "checkpoint",
    "body-mismatch": "body",
    "wrong-key": "signature",
    "digest-mismatch": "digest",
    "untrusted-ca": "chain",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signer", required=True, help="tests/support/sigstore_signer.py")
    args = parser.parse_args()
    try:
        import sigstore  # noqa: F401
        from sigstore.models import Bundle, TrustedRoot  # noqa: F401
        from sigstore.verify import Verifier, policy  # noqa: F401
    except ImportError as exc:
        return support.skipped(f"this interpreter has no sigstore package ({exc})")

    report = support.Report()
    report.info(f"sigstore-python {sigstore.__version__}")
    with tempfile.TemporaryDirectory(prefix="kernhub-sigstore-") as tmp:
        Checks(report, Path(args.signer), Path(tmp)).run()
    return report.finish()


class Checks:
    def __init__(self, report, signer, tmp):
        self.report = report
        self.signer = signer
        self.tmp = tmp
        self.inst = tmp / "instance"
        self.artifact = tmp / "metadata.json"
        self.artifact.write_text('{"digest": "sha256:' + "ab" * 32 + '"}\n')
        self.count = 0

    def run_signer(self, *argv):
        return subprocess.run(
            [sys.executable, str(self.signer), *argv], capture_output=True, text=True, timeout=support.TIMEOUT
        )

    def sign(self, inst=None, identity=IDENTITY, issuer=ISSUER, repository=REPOSITORY, version="0.3", faults=(),
             timestamp=False):
        self.count += 1
        out = self.tmp / f"bundle{self.count}.json"
        argv = ["sign", str(inst or self.inst), str(self.artifact), "--out", str(out)]
        argv += ["--identity", identity, "--issuer", issuer, "--bundle-version", version]
        if repository:
            argv += ["--repository", repository]
        for fault in faults:
            argv += ["--fault", fault]
        if timestamp:
            argv.append("--timestamp")
        done = self.run_signer(*argv)
        if done.returncode != 0:
            raise RuntimeError(f"sigstore_signer.py {' '.join(argv)} failed: {done.stderr}")
        return out.read_text()

    def root(self, inst=None):
        from sigstore.models import TrustedRoot

        return TrustedRoot.from_file(str((inst or self.inst) / "trusted_root.json"))

    def verify(self, bundle_json, inst=None, identity=IDENTITY, issuer=ISSUER, extra=(), data=None):
        """verify_artifact; returns None when accepted, else the error text."""
        from sigstore.models import Bundle
        from sigstore.verify import Verifier, policy

        try:
            bundle = Bundle.from_json(bundle_json)
            rules = policy.AllOf([policy.Identity(identity=identity, issuer=issuer), *extra])
            Verifier(trusted_root=self.root(inst)).verify_artifact(
                data if data is not None else self.artifact.read_bytes(), bundle, rules
            )
            return None
        except Exception as exc:  # sigstore raises several error types
            return f"{type(exc).__name__}: {exc}"

    def accepted(self, bundle_json, what, **kwargs):
        error = self.verify(bundle_json, **kwargs)
        self.report.check(error is None, f"sigstore-python accepts {what}", str(error))

    def rejected(self, bundle_json, what, **kwargs):
        error = self.verify(bundle_json, **kwargs)
        self.report.check(error is not None, f"sigstore-python rejects {what}", "it verified")
        if error:
            self.report.info(f"{what}: {error[:200]}")

    # ---- the checks ---------------------------------------------------------------

    def run(self):
        done = self.run_signer("init", str(self.inst))
        if not self.report.check(done.returncode == 0, "sigstore_signer.py init exits 0", done.stderr):
            return
        self.check_trusted_root()
        self.check_good_bundles()
        self.check_log_grows()
        self.check_policy_and_artifact()
        for fault, step in FAULT_STEP.items():
            self.check_fault(fault, step)
        self.check_dsse()
        self.check_parser_refusals()
        self.check_timestamps()
        done = self.run_signer("sign", str(self.inst), str(self.artifact), "--out", str(self.tmp / "x"),
                               "--identity", IDENTITY, "--issuer", ISSUER, "--fault", "no-such-fault")
        self.report.check(done.returncode == 2, "sign refuses an unknown fault (exit 2)", done.stderr)

    def check_trusted_root(self):
        from datetime import datetime, timezone

        doc = json.loads((self.inst / "trusted_root.json").read_text())
        self.report.equal(doc["mediaType"], "application/vnd.dev.sigstore.trustedroot+json;version=0.1",
                          "trusted_root.json media type")
        self.report.equal(doc["timestampAuthorities"], [], "trusted_root.json has no timestamp authorities")
        logs = doc["tlogs"] + doc["ctlogs"]
        ids_ok = all(
            base64.b64decode(log["logId"]["keyId"])
            == hashlib.sha256(base64.b64decode(log["publicKey"]["rawBytes"])).digest()
            for log in logs
        )
        self.report.check(ids_ok and len(logs) == 2, "each log id is the SHA-256 of its DER public key")
        now = datetime.now(timezone.utc)
        starts = [log["publicKey"]["validFor"]["start"] for log in logs]
        starts += [ca["validFor"]["start"] for ca in doc["certificateAuthorities"]]
        started = all(datetime.fromisoformat(s.replace("Z", "+00:00")) < now for s in starts)
        self.report.check(started, "every validFor of the root started in the past", str(starts))
        root = self.root()
        self.report.equal(len(root.get_fulcio_certs()), 2, "sigstore-python loads the root: CA intermediate + root")

    def check_good_bundles(self):
        from sigstore.verify import policy

        v2_rules = [policy.OIDCIssuerV2(ISSUER), policy.OIDCSourceRepositoryURI(REPOSITORY),
                    policy.OIDCBuildSignerURI(IDENTITY)]
        for version in ("0.1", "0.2", "0.3"):
            bundle = self.sign(version=version)
            self.accepted(bundle, f"a v{version} bundle (URI identity, issuer .1.1/.1.8, repository .1.12)",
                          extra=v2_rules)
        self.accepted(self.sign(identity=EMAIL, issuer=EMAIL_ISSUER, repository=""),
                      "a bundle for an email identity", identity=EMAIL, issuer=EMAIL_ISSUER)
        sharded = self.tmp / "sharded"
        done = self.run_signer("init", str(sharded), "--shard-offset", "123456")
        self.report.check(done.returncode == 0, "init --shard-offset exits 0", done.stderr)
        bundle = self.sign(inst=sharded)
        entry = json.loads(bundle)["verificationMaterial"]["tlogEntries"][0]
        self.report.equal(int(entry["logIndex"]) - int(entry["inclusionProof"]["logIndex"]), 123456,
                          "a sharded instance's logIndex is the tree index plus the offset")
        self.accepted(bundle, "a bundle from a sharded instance", inst=sharded)
        self.rejected(bundle, "a bundle checked against another instance's root")

    def check_log_grows(self):
        entries = [json.loads(self.sign())["verificationMaterial"]["tlogEntries"][0] for _ in range(2)]
        first, second = (int(e["logIndex"]) for e in entries)
        sizes = [int(e["inclusionProof"]["treeSize"]) for e in entries]
        self.report.check(second > first, "successive entries get increasing logIndex", f"{first}, {second}")
        self.report.check(sizes[1] > sizes[0] > 1, "the tree grows and holds several leaves", str(sizes))
        self.report.check(all(e["inclusionProof"]["hashes"] for e in entries), "inclusion proofs are not empty")

    def check_policy_and_artifact(self):
        from sigstore.verify import policy

        bundle = self.sign()
        self.rejected(bundle, "a changed artifact", data=self.artifact.read_bytes() + b" ")
        self.rejected(bundle, "another identity", identity=IDENTITY.replace("relu", "gelu"))
        self.rejected(bundle, "another issuer", issuer="https://accounts.google.com")
        self.rejected(bundle, "another source repository",
                      extra=[policy.OIDCSourceRepositoryURI(REPOSITORY.replace("relu", "gelu"))])

    def check_fault(self, fault, step):
        from sigstore.models import Bundle

        bundle_json = self.sign(faults=[fault])
        self.rejected(bundle_json, f"fault {fault}")
        results = steps(Bundle.from_json(bundle_json), self.artifact.read_bytes(), self.root())
        failed = sorted(name for name, error in results.items() if error)
        self.report.equal(failed, [step], f"fault {fault} fails sigstore-python's {step} step and no other")

    def check_dsse(self):
        from sigstore.models import Bundle
        from sigstore.verify import Verifier, policy

        bundle_json = self.sign(faults=["dsse"])
        self.rejected(bundle_json, "fault dsse as a message signature (verify_artifact)")
        try:
            payload_type, payload = Verifier(trusted_root=self.root()).verify_dsse(
                Bundle.from_json(bundle_json), policy.Identity(identity=IDENTITY, issuer=ISSUER)
            )
            statement = json.loads(payload)
            digest = statement["subject"][0]["digest"]["sha256"]
            ok = payload_type == "application/vnd.in-toto+json" and digest == hashlib.sha256(
                self.artifact.read_bytes()).hexdigest()
            self.report.check(ok, "sigstore-python verify_dsse accepts fault dsse (an in-toto statement "
                              "over the artifact)", payload_type)
        except Exception as exc:
            self.report.check(False, "sigstore-python verify_dsse accepts fault dsse", f"{type(exc).__name__}: {exc}")

    def check_parser_refusals(self):
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.serialization import load_der_public_key
        import rfc8785

        for fault, version, why in (("no-set", "0.3", "inclusion promise"), ("no-set", "0.1", "inclusion promise"),
                                    ("no-proof", "0.3", "inclusionProof"), ("no-proof", "0.1", "inclusionProof")):
            error = self.verify(self.sign(version=version, faults=[fault])) or ""
            self.report.check(why in error, f"sigstore-python's parser refuses fault {fault} in v{version}", error)
        # A v0.1 bundle may lack the proof (the client spec needs the SET
        # only), but sigstore-python 4 requires the proof in every version;
        # show that the rest of such a bundle is valid: its SET verifies.
        bundle = json.loads(self.sign(version="0.1", faults=["no-proof"]))
        entry = bundle["verificationMaterial"]["tlogEntries"][0]
        doc = json.loads((self.inst / "trusted_root.json").read_text())
        key = load_der_public_key(base64.b64decode(doc["tlogs"][0]["publicKey"]["rawBytes"]))
        payload = rfc8785.dumps({
            "body": entry["canonicalizedBody"],
            "integratedTime": int(entry["integratedTime"]),
            "logID": base64.b64decode(entry["logId"]["keyId"]).hex(),
            "logIndex": int(entry["logIndex"]),
        })
        try:
            key.verify(base64.b64decode(entry["inclusionPromise"]["signedEntryTimestamp"]), payload,
                       ec.ECDSA(hashes.SHA256()))
            ok = True
        except Exception:
            ok = False
        self.report.check(ok, "a v0.1 bundle without inclusion proof carries a valid SET")
        self.report.info("sigstore-python 4 refuses any bundle without an inclusion proof, v0.1 included; "
                         "kernhub's verifier may accept a v0.1 bundle with a SET only")


    def check_timestamps(self):
        from datetime import datetime, timezone
        from sigstore.models import Bundle
        from sigstore.verify import Verifier

        inst = self.tmp / "with-tsa"
        done = self.run_signer("init", str(inst), "--tsa", "--backdate-days", "400")
        if not self.report.check(done.returncode == 0, "init --tsa --backdate-days 400 exits 0", done.stderr):
            return
        doc = json.loads((inst / "trusted_root.json").read_text())
        self.report.equal(len(doc["timestampAuthorities"]), 1, "init --tsa lists one timestamp authority")
        start = datetime.fromisoformat(doc["tlogs"][0]["publicKey"]["validFor"]["start"].replace("Z", "+00:00"))
        age = datetime.now(timezone.utc) - start
        self.report.check(timedelta(days=399) < age < timedelta(days=401),
                          "init --backdate-days 400 starts the keys' validity 400 days ago", str(age))
        verifier = Verifier(trusted_root=self.root(inst))

        def timestamps_verified(bundle_json):
            return len(verifier._verify_timestamp_authority(Bundle.from_json(bundle_json)))

        both = self.sign(inst=inst, timestamp=True)
        self.accepted(both, "a bundle with a SET and an RFC 3161 timestamp of the root's TSA", inst=inst)
        self.report.equal(timestamps_verified(both), 1, "sigstore-python verifies that RFC 3161 timestamp")
        tsa_only = self.sign(inst=inst, timestamp=True, faults=["no-set"])
        self.accepted(tsa_only, "a bundle whose only signed time is the RFC 3161 timestamp (no SET)", inst=inst)
        self.accepted(self.sign(inst=inst, version="0.2", timestamp=True), "a v0.2 bundle with a timestamp",
                      inst=inst)
        untrusted = self.sign(inst=inst, faults=["untrusted-tsa"])
        self.report.equal(timestamps_verified(untrusted), 0,
                          "fault untrusted-tsa: sigstore-python verifies no timestamp of it")
        self.accepted(untrusted, "fault untrusted-tsa with a SET (the log time suffices)", inst=inst)
        self.rejected(self.sign(inst=inst, faults=["untrusted-tsa", "no-set"]),
                      "faults untrusted-tsa + no-set (no verified time)", inst=inst)
        self.rejected(self.sign(timestamp=True), "a timestamped bundle against a root without TSAs")


def steps(bundle, artifact, root):
    """Runs sigstore-python's own verification steps one by one; returns
    step -> error text (None when it passed). The chain is checked at a time
    inside the leaf's validity, so that `validity` alone judges the log time."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.asymmetric.utils import Prehashed
    from datetime import datetime, timezone
    from sigstore._internal.merkle import verify_merkle_inclusion
    from sigstore._internal.rekor.checkpoint import verify_checkpoint
    from sigstore._internal.sct import verify_sct
    from sigstore._internal.timestamp import TimestampSource, TimestampVerificationResult
    from sigstore._internal.trust import KeyringPurpose
    from sigstore._utils import sha256_digest
    from sigstore.verify import Verifier
    from sigstore.verify.verifier import _validate_hashedrekord_v001_entry_body

    cert = bundle.signing_certificate
    entry = bundle.log_entry
    rekor = root.rekor_keyring(KeyringPurpose.VERIFY)
    hashed = sha256_digest(artifact)
    signature = bundle._inner.message_signature
    integrated = datetime.fromtimestamp(entry._inner.integrated_time, tz=timezone.utc)
    chain = []

    def chain_step():
        when = cert.not_valid_before_utc + timedelta(seconds=1)
        chain.extend(Verifier(trusted_root=root)._verify_chain_at_time(
            cert, TimestampVerificationResult(source=TimestampSource.TRANSPARENCY_SERVICE, time=when)))

    def validity_step():
        if not cert.not_valid_before_utc <= integrated <= cert.not_valid_after_utc:
            raise ValueError("the leaf was not valid at the integrated time")

    def sct_step():
        if not chain:
            return  # no chain to the root (judged by the chain step)
        verify_sct(cert, chain, root.ct_keyring(KeyringPurpose.VERIFY))

    def digest_step():
        if signature.message_digest.digest != hashed.digest:
            raise ValueError("messageDigest is not the artifact's SHA-256")

    checks = {
        "chain": chain_step,
        "validity": validity_step,
        "sct": sct_step,
        "set": lambda: entry._verify_set(rekor),
        "proof": lambda: verify_merkle_inclusion(entry),
        "checkpoint": lambda: verify_checkpoint(rekor, entry),
        "signature": lambda: cert.public_key().verify(signature.signature, hashed.digest,
                                                       ec.ECDSA(Prehashed(hashes.SHA256()))),
        "digest": digest_step,
        "body": lambda: _validate_hashedrekord_v001_entry_body(bundle, hashed),
    }
    results = {}
    for name, check in checks.items():
        try:
            check()
            results[name] = None
        except Exception as exc:
            results[name] = f"{type(exc).__name__}: {exc}" or "failed"
    return results


if __name__ == "__main__":
    sys.exit(main())
