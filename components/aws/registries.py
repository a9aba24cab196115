"""AWS registries: images through each region's ECR, and one S3 weights bucket per region,
versioned on both sides, replicated from the first region.

Images: every AWS region has a pull-through cache rule per public registry the toolkit's images
come from (rules are regional), with a login for Docker Hub and GHCR when the stack names one
(`registries.upstream_credentials`). Images no cache can fetch (Docker Hub without a login) live
in repositories of the stack's own under the same paths, filled by a mirror step in the first
region and replicated into the others. Either way a cluster pulls
`<acct>.dkr.ecr.<region>.amazonaws.com/<prefix>/<namespace>/<upstream path>` (serving/images.py).

The first AWS region of the stack is the source: images are pushed and models published there,
and AWS copies them on (ECR replication; S3 replication, with Replication Time Control where the
posture asks for a replication SLA,
which commits to 99.99% of objects within 15 minutes).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from components.aws.keys import customer_key
from components.contract import RegionStore
from serving.charts import IMAGES, Upstream
from serving.hardware import Cloud
from serving.images import cache_path, upstreams_of
from stacks.naming import MODELS_PREFIX, aws_account, weights_bucket, weights_root
from stacks.plan import Plan, RegionPlan
from stacks.schema import CONFIG_NAMESPACE, RegionSpec

RTC_MINUTES = 15  # the only value S3 Replication Time Control accepts
UNTAGGED_EXPIRY = json.dumps({"rules": [{
    "rulePriority": 1, "description": "drop untagged layers after a week",
    "selection": {"tagStatus": "untagged", "countType": "sinceImagePushed",
                  "countUnit": "days", "countNumber": 7},
    "action": {"type": "expire"}}]})


def replication_trust(account: str, source_bucket_arn: str) -> str:
    """The trust of the S3 replication role: S3 may assume it only for replication out of the
    stack's own source bucket, in the stack's own account.

    The S3 user guide ("Setting up permissions for live replication", awsdocs/amazon-s3-userguide
    doc_source/setting-repl-config-perm-overview.md) shows `s3.amazonaws.com` trusted with no
    condition. AWS's cross-service confused-deputy guidance (the per-service "Cross-service
    confused deputy prevention" pages, e.g. Amazon Personalize's and AWS IoT's) recommends
    holding a service-principal trust to `aws:SourceAccount` and `aws:SourceArn`: the account that
    owns, and the ARN of, the resource the service acts for; here the source bucket, whose
    replication configuration names the role. Caveat: the S3 guide itself does not list the keys
    S3 puts on its AssumeRole call for replication; a first `pulumi up` with replication metrics
    on (prod) shows failures at once if it ever omitted them. Both conditions must hold.
    """
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "s3.amazonaws.com"}, "Action": "sts:AssumeRole",
        "Condition": {"StringEquals": {"aws:SourceAccount": account},
                      "ArnEquals": {"aws:SourceArn": source_bucket_arn}}}]})


def tls_only_policy(bucket_arn: str) -> str:
    """A bucket policy denying every S3 action on the bucket and its objects over plain HTTP."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Sid": "DenyWithoutTls", "Effect": "Deny", "Principal": "*", "Action": "s3:*",
        "Resource": [bucket_arn, f"{bucket_arn}/*"],
        "Condition": {"Bool": {"aws:SecureTransport": "false"}}}]})


@dataclass(frozen=True)
class AwsStore(RegionStore):
    bucket_arn: pulumi.Output[str]  # the region's weights bucket
    key_arn: pulumi.Output[str] | None  # the customer key encrypting it, where the posture has one


class AwsRegistries(pulumi.ComponentResource):
    stores: dict[str, AwsStore]

    def __init__(self, name: str, plan: Plan, region_plans: Sequence[RegionPlan],
                 providers: Mapping[str, pulumi.ProviderResource],
                 opts: pulumi.ResourceOptions | None = None) -> None:
        regions = [r.region for r in region_plans]
        super().__init__("rtip:aws:Registries", name, {
            "regions": [r.region for r in regions], "source": regions[0].region}, opts)
        spec = plan.spec
        cmk, rtc = plan.posture.stores_customer_key, plan.posture.replication_sla
        primary = regions[0]
        popts = pulumi.ResourceOptions(parent=self, provider=providers[primary.region])
        prefix = spec.registries.name_prefix

        creds = spec.registries.upstream_credentials
        # Upstreams a pull-through cache serves: those ECR reaches without a login, and those the
        # stack names a login for. The toolkit's other images come from repositories of the
        # stack's own, filled by a mirror step and replicated like any other (below).
        cached = [u for u in upstreams_of(tuple(IMAGES)).values()
                  if not u.ecr_needs_credential or u.host in creds]
        mirrored = [k for k in spec.registries.images if cache_path(k)[0] not in cached]
        ecr_key = customer_key(f"{name}-ecr", "ECR image encryption", popts) if cmk else None
        repos = []
        for image in mirrored:
            upstream, path = cache_path(image)
            repo = aws.ecr.Repository(f"{name}-{image}", aws.ecr.RepositoryArgs(
                # The path the cluster pulls (serving/images.py), as a pull-through cache would file it.
                name=f"{prefix}/{upstream.namespace}/{path}",
                # Tags are the pinning mechanism of the runtimes: a tag must never move.
                image_tag_mutability="IMMUTABLE",
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=True),
                encryption_configurations=[aws.ecr.RepositoryEncryptionConfigurationArgs(
                    encryption_type="KMS", kms_key=ecr_key.arn) if ecr_key else
                    aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="AES256")],
            ), opts=popts)
            aws.ecr.LifecyclePolicy(f"{name}-{image}", aws.ecr.LifecyclePolicyArgs(
                repository=repo.name,
                policy=UNTAGGED_EXPIRY,
            ), opts=popts)
            repos.append(repo)
        rules = {r.region: self._pull_through(
            f"{name}-{r.region}", prefix, cached, plan,
            pulumi.ResourceOptions(parent=self, provider=providers[r.region])) for r in regions}
        if len(regions) > 1 and repos:
            aws.ecr.ReplicationConfiguration(f"{name}-ecr-replication",
                aws.ecr.ReplicationConfigurationArgs(
                    replication_configuration=aws.ecr.ReplicationConfigurationReplicationConfigurationArgs(
                        rules=[aws.ecr.ReplicationConfigurationReplicationConfigurationRuleArgs(
                            destinations=[
                                aws.ecr.ReplicationConfigurationReplicationConfigurationRuleDestinationArgs(
                                    region=r.region, registry_id=repos[0].registry_id)
                                for r in regions[1:]],
                            # Exactly the mirrored repositories: the pull-through caches under the
                            # same prefix fill themselves in every region.
                            repository_filters=[
                                aws.ecr.ReplicationConfigurationReplicationConfigurationRuleRepositoryFilterArgs(
                                    filter=repo.name, filter_type="PREFIX_MATCH") for repo in repos],
                        )])),
                opts=popts)

        self.stores = {}
        buckets: dict[str, aws.s3.Bucket] = {}
        keys: dict[str, aws.kms.Key | None] = {}
        versioned: list[pulumi.Resource] = []
        for region in regions:
            ropts = pulumi.ResourceOptions(parent=self, provider=providers[region.region])
            rname = f"{name}-{region.region}"
            key = (customer_key(f"{rname}-weights", f"model weights in {region.region}", ropts)
                   if cmk else None)
            bucket = aws.s3.Bucket(f"{rname}-weights", aws.s3.BucketArgs(
                bucket=weights_bucket(spec, region), force_destroy=False), opts=ropts)
            versioned.append(aws.s3.BucketVersioning(f"{rname}-weights", aws.s3.BucketVersioningInitArgs(
                bucket=bucket.id,
                versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                    status="Enabled")), opts=ropts))
            aws.s3.BucketPublicAccessBlock(f"{rname}-weights", aws.s3.BucketPublicAccessBlockArgs(
                bucket=bucket.id, block_public_acls=True, block_public_policy=True,
                ignore_public_acls=True, restrict_public_buckets=True), opts=ropts)
            # The bucket's one policy (S3 keeps a single policy per bucket; replication grants
            # live on its IAM role, not here): refuse every request made without TLS (S3 user
            # guide, "Protecting data in transit with encryption": deny when aws:SecureTransport
            # is false), on the bucket and on its objects. A Deny is never public, so the public
            # access block leaves it alone.
            aws.s3.BucketPolicy(f"{rname}-weights", aws.s3.BucketPolicyArgs(
                bucket=bucket.id, policy=bucket.arn.apply(tls_only_policy)), opts=ropts)
            aws.s3.BucketOwnershipControls(f"{rname}-weights", aws.s3.BucketOwnershipControlsArgs(
                bucket=bucket.id, rule=aws.s3.BucketOwnershipControlsRuleArgs(
                    object_ownership="BucketOwnerEnforced")), opts=ropts)
            aws.s3.BucketServerSideEncryptionConfiguration(
                f"{rname}-weights", aws.s3.BucketServerSideEncryptionConfigurationInitArgs(
                    bucket=bucket.id,
                    rules=[aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                        apply_server_side_encryption_by_default=
                        aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                            sse_algorithm="aws:kms" if key else "AES256",
                            kms_master_key_id=key.arn if key else None),
                        bucket_key_enabled=bool(key))]), opts=ropts)
            # Superseded weights stay for rollback, but only the newest few versions of each file.
            aws.s3.BucketLifecycleConfiguration(f"{rname}-weights", aws.s3.BucketLifecycleConfigurationArgs(
                bucket=bucket.id,
                rules=[aws.s3.BucketLifecycleConfigurationRuleArgs(
                    id="keep-recent-versions", status="Enabled",
                    filter=aws.s3.BucketLifecycleConfigurationRuleFilterArgs(prefix=f"{MODELS_PREFIX}/"),
                    noncurrent_version_expiration=
                    aws.s3.BucketLifecycleConfigurationRuleNoncurrentVersionExpirationArgs(
                        noncurrent_days=30,
                        newer_noncurrent_versions=spec.registries.weights_versions_kept),
                    abort_incomplete_multipart_upload=
                    aws.s3.BucketLifecycleConfigurationRuleAbortIncompleteMultipartUploadArgs(
                        days_after_initiation=2),
                )]), opts=ropts)
            buckets[region.region], keys[region.region] = bucket, key
            account = rules[region.region][0].registry_id if rules[region.region] else repos[0].registry_id
            self.stores[region.region] = AwsStore(
                cloud=Cloud.AWS, region=region.region,
                image_registry=account.apply(
                    lambda acct, r=region.region: f"{acct}.dkr.ecr.{r}.amazonaws.com/{prefix}"),
                weights_uri=weights_root(spec, region),
                bucket_arn=bucket.arn, key_arn=key.arn if key else None,
            )
        if len(regions) > 1:
            # The account the stack deploys into: the deployer's (the providers accept no other),
            # else the one owning the source region's registry (an ECR registry ID is its account).
            owner = rules[primary.region][0].registry_id if rules[primary.region] else repos[0].registry_id
            deployer = aws_account(spec)
            self._replication(name, regions, buckets, keys, versioned, rtc,
                              pulumi.Output.from_input(deployer) if deployer else owner, popts)
        self.mirrored = {k: f"{prefix}/{cache_path(k)[0].namespace}/{cache_path(k)[1]}" for k in mirrored}
        self.register_outputs({})

    def _pull_through(self, name: str, prefix: str, cached: list[Upstream], plan: Plan,
                      ropts: pulumi.ResourceOptions) -> list[aws.ecr.PullThroughCacheRule]:
        """One region's pull-through caches: a rule per upstream (rules are regional, so every
        region has its own), its login where ECR needs one, and the settings of the repositories
        ECR creates on a first pull (a repository creation template).

        ECR files an image pulled through the rule with prefix `<prefix>/docker-hub` under
        `<prefix>/docker-hub/<upstream path>` (Docker Hub official images as `library/<name>`).
        A Docker Hub or GHCR login is a Secrets Manager secret whose name starts with
        `ecr-pullthroughcache/`, in the rule's own account and region, holding `username` and
        `accessToken` (ECR user guide, "Creating a pull through cache rule"; API pattern of
        `credentialArn`). The values come from the stack's secret config, never from the spec.
        """
        spec = plan.spec
        config = pulumi.Config(CONFIG_NAMESPACE)
        rules = []
        for upstream in cached:
            ns = f"{prefix}/{upstream.namespace}"
            credential = None
            login = spec.registries.upstream_credentials.get(upstream.host)
            if upstream.ecr_needs_credential and login is not None:
                login_name = f"{name}-{upstream.namespace}-login"
                secret = aws.secretsmanager.Secret(login_name, aws.secretsmanager.SecretArgs(
                    name=f"ecr-pullthroughcache/{prefix}-{spec.environment}-{upstream.namespace}",
                    description=f"{upstream.host} login of the {ns} pull-through cache",
                    recovery_window_in_days=7), opts=ropts)
                aws.secretsmanager.SecretVersion(login_name, aws.secretsmanager.SecretVersionArgs(
                    secret_id=secret.id,
                    secret_string=pulumi.Output.json_dumps({
                        "username": config.require_secret(login.username),
                        "accessToken": config.require_secret(login.token)})), opts=ropts)
                credential = secret.arn
            rname = f"{name}-{upstream.namespace}"
            template = aws.ecr.RepositoryCreationTemplate(rname, aws.ecr.RepositoryCreationTemplateArgs(
                prefix=ns, applied_fors=["PULL_THROUGH_CACHE"],
                description=f"repositories the {upstream.host} pull-through cache creates",
                # A cached tag is never moved under a running stack; pin a new tag or a digest.
                image_tag_mutability="IMMUTABLE",
                encryption_configurations=[aws.ecr.RepositoryCreationTemplateEncryptionConfigurationArgs(
                    encryption_type="AES256")],
                lifecycle_policy=UNTAGGED_EXPIRY), opts=ropts)
            rules.append(aws.ecr.PullThroughCacheRule(rname, aws.ecr.PullThroughCacheRuleArgs(
                ecr_repository_prefix=ns, upstream_registry_url=upstream.ecr_url, credential_arn=credential,
            ), opts=pulumi.ResourceOptions.merge(ropts, pulumi.ResourceOptions(depends_on=[template]))))
        return rules

    def _replication(self, name: str, regions: list[RegionSpec], buckets: dict[str, aws.s3.Bucket],
                     keys: dict[str, aws.kms.Key | None], versioned: list[pulumi.Resource], rtc: bool,
                     account: pulumi.Output[str], popts: pulumi.ResourceOptions) -> None:
        source = regions[0].region
        role = aws.iam.Role(f"{name}-s3-replication", aws.iam.RoleArgs(
            assume_role_policy=pulumi.Output.all(account, buckets[source].arn).apply(
                lambda a: replication_trust(a[0], a[1]))), opts=popts)
        targets = [buckets[r.region] for r in regions[1:]]
        src_key = keys[source]
        dst_keys = [k for r in regions[1:] if (k := keys[r.region]) is not None]

        def policy(args: list[str]) -> str:
            src_arn, *rest = args
            dst_arns = rest[:len(targets)]
            kms = rest[len(targets):]
            statements = [
                {"Effect": "Allow", "Action": ["s3:GetReplicationConfiguration", "s3:ListBucket"],
                 "Resource": [src_arn]},
                {"Effect": "Allow", "Action": ["s3:GetObjectVersionForReplication",
                                               "s3:GetObjectVersionAcl", "s3:GetObjectVersionTagging"],
                 "Resource": [f"{src_arn}/*"]},
                {"Effect": "Allow", "Action": ["s3:ReplicateObject", "s3:ReplicateDelete",
                                               "s3:ReplicateTags"],
                 "Resource": [f"{d}/*" for d in dst_arns]},
            ]
            if kms:
                statements += [
                    {"Effect": "Allow", "Action": ["kms:Decrypt"], "Resource": [kms[0]]},
                    {"Effect": "Allow", "Action": ["kms:Encrypt"], "Resource": kms[1:]},
                ]
            return json.dumps({"Version": "2012-10-17", "Statement": statements})

        kms_arns = [src_key.arn, *(k.arn for k in dst_keys)] if src_key else []
        grant = aws.iam.RolePolicy(f"{name}-s3-replication", aws.iam.RolePolicyArgs(
            role=role.id,
            policy=pulumi.Output.all(buckets[source].arn, *(t.arn for t in targets), *kms_arns)
            .apply(policy)), opts=popts)
        rules = []
        for i, (region, target) in enumerate(zip(regions[1:], targets, strict=True)):
            key = keys[region.region]
            rules.append(aws.s3.BucketReplicationConfigRuleArgs(
                id=f"to-{region.region}", priority=i + 1, status="Enabled",
                filter=aws.s3.BucketReplicationConfigRuleFilterArgs(prefix=f"{MODELS_PREFIX}/"),
                delete_marker_replication=aws.s3.BucketReplicationConfigRuleDeleteMarkerReplicationArgs(
                    status="Enabled"),
                source_selection_criteria=aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaArgs(
                    sse_kms_encrypted_objects=
                    aws.s3.BucketReplicationConfigRuleSourceSelectionCriteriaSseKmsEncryptedObjectsArgs(
                        status="Enabled")) if key else None,
                destination=aws.s3.BucketReplicationConfigRuleDestinationArgs(
                    bucket=target.arn, storage_class="STANDARD",
                    encryption_configuration=
                    aws.s3.BucketReplicationConfigRuleDestinationEncryptionConfigurationArgs(
                        replica_kms_key_id=key.arn) if key else None,
                    replication_time=aws.s3.BucketReplicationConfigRuleDestinationReplicationTimeArgs(
                        status="Enabled",
                        time=aws.s3.BucketReplicationConfigRuleDestinationReplicationTimeTimeArgs(
                            minutes=RTC_MINUTES)) if rtc else None,
                    metrics=aws.s3.BucketReplicationConfigRuleDestinationMetricsArgs(
                        status="Enabled",
                        event_threshold=aws.s3.BucketReplicationConfigRuleDestinationMetricsEventThresholdArgs(
                            minutes=RTC_MINUTES)) if rtc else None,
                ),
            ))
        aws.s3.BucketReplicationConfig(f"{name}-s3-replication", aws.s3.BucketReplicationConfigArgs(
            bucket=buckets[source].id, role=role.arn, rules=rules),
            # Replication needs versioning on both sides first.
            opts=pulumi.ResourceOptions.merge(popts, pulumi.ResourceOptions(
                depends_on=[*versioned, grant])))


__all__ = ["AwsRegistries", "AwsStore", "replication_trust", "tls_only_policy"]
