"""Field tables of the Kubernetes protobuf messages kubesim decodes (see ``protobuf.py``).

Facts of the published ``generated.proto`` files of k8s.io/api and apimachinery, joined
with their Go types' JSON tags. One message per entry, continued on indented lines:
``Name: field=number[:type][!] ...``, ``type`` one of ``string`` (the default),
``bytes``, ``int``, ``bool``, ``double`` or a message; ``[T]`` repeated, ``{T}`` a map;
``*`` an embedded struct; ``!`` keeps a zero value (a pointer, or no ``omitempty``),
other zero values are dropped as JSON drops them. ``_parse`` checks every named message
is described.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# apiVersion -> the kinds sent as top-level objects that kubesim decodes. A body naming any
# other kind is answered 415 (Kubernetes itself has no protobuf form for custom kinds).
KINDS: dict[str, frozenset[str]] = {
    "v1": frozenset(
        {
            "ConfigMap",
            "Endpoints",
            "Event",
            "LimitRange",
            "Namespace",
            "Node",
            "Pod",
            "ResourceQuota",
            "Secret",
            "Service",
            "ServiceAccount",
        }
    ),
    "batch/v1": frozenset({"Job"}),
    "networking.k8s.io/v1": frozenset({"NetworkPolicy"}),
    "rbac.authorization.k8s.io/v1": frozenset(
        {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
    ),
    "authorization.k8s.io/v1": frozenset({"SelfSubjectAccessReview", "SelfSubjectRulesReview"}),
    "authentication.k8s.io/v1": frozenset({"SelfSubjectReview"}),
}
# DELETE bodies: client-go stamps DeleteOptions with the apiVersion of the resource's group.
ANY_VERSION_KINDS = frozenset({"DeleteOptions"})

SCALARS = frozenset({"string", "bytes", "int", "bool", "double"})

_SCHEMA = """
# meta/v1 (k8s.io/apimachinery), with Time, MicroTime and FieldsV1 converted after decoding
Condition: type=1! status=2! observedGeneration=3:int lastTransitionTime=4:Time reason=5!
    message=6!
DeleteOptions: gracePeriodSeconds=1:int! preconditions=2:Preconditions orphanDependents=3:bool!
    propagationPolicy=4! dryRun=5:[string]
    ignoreStoreReadErrorWithClusterBreakingPotential=6:bool!
FieldsV1: Raw=1:bytes
LabelSelector: matchLabels=1:{string} matchExpressions=2:[LabelSelectorRequirement]
LabelSelectorRequirement: key=1! operator=2! values=3:[string]
ManagedFieldsEntry: manager=1 operation=2 apiVersion=3 time=4:Time fieldsType=6
    fieldsV1=7:FieldsV1 subresource=8
MicroTime: seconds=1:int nanos=2:int
ObjectMeta: name=1 generateName=2 namespace=3 selfLink=4 uid=5 resourceVersion=6
    generation=7:int creationTimestamp=8:Time deletionTimestamp=9:Time
    deletionGracePeriodSeconds=10:int! labels=11:{string} annotations=12:{string}
    ownerReferences=13:[OwnerReference] finalizers=14:[string]
    managedFields=17:[ManagedFieldsEntry]
OwnerReference: kind=1! name=3! uid=4! apiVersion=5! controller=6:bool!
    blockOwnerDeletion=7:bool!
Preconditions: uid=1! resourceVersion=2!
Time: seconds=1:int nanos=2:int

# resource.Quantity and intstr.IntOrString, converted after decoding
IntOrString: type=1:int intVal=2:int strVal=3
Quantity: string=1

# core/v1
AWSElasticBlockStoreVolumeSource: volumeID=1! fsType=2 partition=3:int readOnly=4:bool
Affinity: nodeAffinity=1:NodeAffinity podAffinity=2:PodAffinity
    podAntiAffinity=3:PodAntiAffinity
AppArmorProfile: type=1! localhostProfile=2!
AttachedVolume: name=1! devicePath=2!
AzureDiskVolumeSource: diskName=1! diskURI=2! cachingMode=3! fsType=4! readOnly=5:bool! kind=6!
AzureFileVolumeSource: secretName=1! shareName=2! readOnly=3:bool
CSIVolumeSource: driver=1! readOnly=2:bool! fsType=3! volumeAttributes=4:{string}
    nodePublishSecretRef=5:LocalObjectReference
Capabilities: add=1:[string] drop=2:[string]
CephFSVolumeSource: monitors=1:[string] path=2 user=3 secretFile=4
    secretRef=5:LocalObjectReference readOnly=6:bool
CinderVolumeSource: volumeID=1! fsType=2 readOnly=3:bool secretRef=4:LocalObjectReference
ClientIPConfig: timeoutSeconds=1:int!
ClusterTrustBundleProjection: name=1! signerName=2! labelSelector=3:LabelSelector path=4!
    optional=5:bool! user=6:int!
ConfigMap: metadata=1:ObjectMeta data=2:{string} binaryData=3:{bytes} immutable=4:bool!
ConfigMapEnvSource: *=1:LocalObjectReference optional=2:bool!
ConfigMapKeySelector: *=1:LocalObjectReference key=2! optional=3:bool!
ConfigMapNodeConfigSource: namespace=1! name=2! uid=3 resourceVersion=4 kubeletConfigKey=5!
ConfigMapProjection: *=1:LocalObjectReference items=2:[KeyToPath] optional=4:bool!
ConfigMapVolumeSource: *=1:LocalObjectReference items=2:[KeyToPath] defaultMode=3:int!
    optional=4:bool! defaultUser=5:int!
Container: name=1! image=2 command=3:[string] args=4:[string] workingDir=5
    ports=6:[ContainerPort] env=7:[EnvVar] resources=8:ResourceRequirements
    volumeMounts=9:[VolumeMount] livenessProbe=10:Probe readinessProbe=11:Probe
    lifecycle=12:Lifecycle terminationMessagePath=13 imagePullPolicy=14
    securityContext=15:SecurityContext stdin=16:bool stdinOnce=17:bool tty=18:bool
    envFrom=19:[EnvFromSource] terminationMessagePolicy=20 volumeDevices=21:[VolumeDevice]
    startupProbe=22:Probe resizePolicy=23:[ContainerResizePolicy] restartPolicy=24!
    restartPolicyRules=25:[ContainerRestartRule]
ContainerExtendedResourceRequest: containerName=1! resourceName=2! requestName=3!
ContainerImage: names=1:[string] sizeBytes=2:int
ContainerPort: name=1 hostPort=2:int containerPort=3:int! protocol=4 hostIP=5
ContainerResizePolicy: resourceName=1! restartPolicy=2!
ContainerRestartRule: action=1 exitCodes=2:ContainerRestartRuleOnExitCodes
ContainerRestartRuleOnExitCodes: operator=1 values=2:[int]
ContainerState: waiting=1:ContainerStateWaiting running=2:ContainerStateRunning
    terminated=3:ContainerStateTerminated
ContainerStateRunning: startedAt=1:Time
ContainerStateTerminated: exitCode=1:int! signal=2:int reason=3 message=4 startedAt=5:Time
    finishedAt=6:Time containerID=7
ContainerStateWaiting: reason=1 message=2
ContainerStatus: name=1! state=2:ContainerState lastState=3:ContainerState ready=4:bool!
    restartCount=5:int! image=6! imageID=7! containerID=8 started=9:bool!
    allocatedResources=10:{Quantity} resources=11:ResourceRequirements
    volumeMounts=12:[VolumeMountStatus] user=13:ContainerUser
    allocatedResourcesStatus=14:[ResourceStatus] stopSignal=15!
ContainerUser: linux=1:LinuxContainerUser
DaemonEndpoint: Port=1:int!
DownwardAPIProjection: items=1:[DownwardAPIVolumeFile]
DownwardAPIVolumeFile: path=1! fieldRef=2:ObjectFieldSelector
    resourceFieldRef=3:ResourceFieldSelector mode=4:int! user=5:int!
DownwardAPIVolumeSource: items=1:[DownwardAPIVolumeFile] defaultMode=2:int! defaultUser=3:int!
EmptyDirVolumeSource: medium=1 sizeLimit=2:Quantity mode=3:int!
EndpointAddress: ip=1! targetRef=2:ObjectReference hostname=3 nodeName=4!
EndpointPort: name=1 port=2:int! protocol=3 appProtocol=4!
EndpointSubset: addresses=1:[EndpointAddress] notReadyAddresses=2:[EndpointAddress]
    ports=3:[EndpointPort]
Endpoints: metadata=1:ObjectMeta subsets=2:[EndpointSubset]
EnvFromSource: prefix=1 configMapRef=2:ConfigMapEnvSource secretRef=3:SecretEnvSource
EnvVar: name=1! value=2 valueFrom=3:EnvVarSource
EnvVarSource: fieldRef=1:ObjectFieldSelector resourceFieldRef=2:ResourceFieldSelector
    configMapKeyRef=3:ConfigMapKeySelector secretKeyRef=4:SecretKeySelector
    fileKeyRef=5:FileKeySelector
EphemeralContainer: *=1:EphemeralContainerCommon targetContainerName=2
EphemeralContainerCommon: name=1! image=2 command=3:[string] args=4:[string] workingDir=5
    ports=6:[ContainerPort] env=7:[EnvVar] resources=8:ResourceRequirements
    volumeMounts=9:[VolumeMount] livenessProbe=10:Probe readinessProbe=11:Probe
    lifecycle=12:Lifecycle terminationMessagePath=13 imagePullPolicy=14
    securityContext=15:SecurityContext stdin=16:bool stdinOnce=17:bool tty=18:bool
    envFrom=19:[EnvFromSource] terminationMessagePolicy=20 volumeDevices=21:[VolumeDevice]
    startupProbe=22:Probe resizePolicy=23:[ContainerResizePolicy] restartPolicy=24!
    restartPolicyRules=25:[ContainerRestartRule]
EphemeralVolumeSource: volumeClaimTemplate=1:PersistentVolumeClaimTemplate
Event: metadata=1:ObjectMeta involvedObject=2:ObjectReference reason=3 message=4
    source=5:EventSource firstTimestamp=6:Time lastTimestamp=7:Time count=8:int type=9
    eventTime=10:MicroTime series=11:EventSeries action=12 related=13:ObjectReference
    reportingComponent=14! reportingInstance=15!
EventSeries: count=1:int lastObservedTime=2:MicroTime
EventSource: component=1 host=2
EvictionResponder: name=1! priority=2:int!
ExecAction: command=1:[string]
FCVolumeSource: targetWWNs=1:[string] lun=2:int! fsType=3 readOnly=4:bool wwids=5:[string]
FileKeySelector: volumeName=1! path=2! key=3! optional=4:bool!
FlexVolumeSource: driver=1! fsType=2 secretRef=3:LocalObjectReference readOnly=4:bool
    options=5:{string}
FlockerVolumeSource: datasetName=1 datasetUUID=2
GCEPersistentDiskVolumeSource: pdName=1! fsType=2 partition=3:int readOnly=4:bool
GRPCAction: port=1:int! service=2! mode=3!
GitRepoVolumeSource: repository=1! revision=2 directory=3
GlusterfsVolumeSource: endpoints=1! path=2! readOnly=3:bool
HTTPGetAction: path=1 port=2:IntOrString! host=3 scheme=4 httpHeaders=5:[HTTPHeader] protocol=6!
HTTPHeader: name=1! value=2!
HostAlias: ip=1! hostnames=2:[string]
HostIP: ip=1!
HostPathVolumeSource: path=1! type=2!
ISCSIVolumeSource: targetPortal=1! iqn=2! lun=3:int! iscsiInterface=4 fsType=5 readOnly=6:bool
    portals=7:[string] chapAuthDiscovery=8:bool secretRef=10:LocalObjectReference
    chapAuthSession=11:bool initiatorName=12!
ImageVolumeSource: reference=1 pullPolicy=2
ImageVolumeStatus: imageRef=1
KeyToPath: key=1! path=2! mode=3:int! user=4:int!
Lifecycle: postStart=1:LifecycleHandler preStop=2:LifecycleHandler stopSignal=3!
LifecycleHandler: exec=1:ExecAction httpGet=2:HTTPGetAction tcpSocket=3:TCPSocketAction
    sleep=4:SleepAction
LimitRange: metadata=1:ObjectMeta spec=2:LimitRangeSpec
LimitRangeItem: type=1! max=2:{Quantity} min=3:{Quantity} default=4:{Quantity}
    defaultRequest=5:{Quantity} maxLimitRequestRatio=6:{Quantity}
LimitRangeSpec: limits=1:[LimitRangeItem]
LinuxContainerUser: uid=1:int! gid=2:int! supplementalGroups=3:[int]
LoadBalancerIngress: ip=1 hostname=2 ipMode=3! ports=4:[PortStatus]
LoadBalancerStatus: ingress=1:[LoadBalancerIngress]
LocalObjectReference: name=1
NFSVolumeSource: server=1! path=2! readOnly=3:bool
Namespace: metadata=1:ObjectMeta spec=2:NamespaceSpec status=3:NamespaceStatus
NamespaceCondition: type=1! status=2! lastTransitionTime=4:Time reason=5 message=6
NamespaceSpec: finalizers=1:[string]
NamespaceStatus: phase=1 conditions=2:[NamespaceCondition]
Node: metadata=1:ObjectMeta spec=2:NodeSpec status=3:NodeStatus
NodeAddress: type=1! address=2!
NodeAffinity: requiredDuringSchedulingIgnoredDuringExecution=1:NodeSelector
    preferredDuringSchedulingIgnoredDuringExecution=2:[PreferredSchedulingTerm]
NodeAllocatableMappedResources: name=1! quantity=2:Quantity
NodeAllocatableOverheadResources: name=1! perPod=2:Quantity perContainer=3:Quantity
NodeAllocatableResourceClaimStatus: resourceClaimName=1! containers=2:[string]
    mapping=4:[NodeAllocatableMappedResources] overhead=5:[NodeAllocatableOverheadResources]
NodeCondition: type=1! status=2! lastHeartbeatTime=3:Time lastTransitionTime=4:Time reason=5
    message=6
NodeConfigSource: configMap=2:ConfigMapNodeConfigSource
NodeConfigStatus: assigned=1:NodeConfigSource active=2:NodeConfigSource
    lastKnownGood=3:NodeConfigSource error=4
NodeDaemonEndpoints: kubeletEndpoint=1:DaemonEndpoint
NodeFeatures: supplementalGroupsPolicy=1:bool!
NodePodPreemptionPolicy: disableResizePreemption=1:[string]
NodeRuntimeHandler: name=1! features=2:NodeRuntimeHandlerFeatures
NodeRuntimeHandlerFeatures: recursiveReadOnlyMounts=1:bool! userNamespaces=2:bool!
NodeSelector: nodeSelectorTerms=1:[NodeSelectorTerm]
NodeSelectorRequirement: key=1! operator=2! values=3:[string]
NodeSelectorTerm: matchExpressions=1:[NodeSelectorRequirement]
    matchFields=2:[NodeSelectorRequirement]
NodeSpec: podCIDR=1 externalID=2 providerID=3 unschedulable=4:bool taints=5:[Taint]
    configSource=6:NodeConfigSource podCIDRs=7:[string]
    podPreemptionPolicy=8:NodePodPreemptionPolicy
NodeStatus: capacity=1:{Quantity} allocatable=2:{Quantity} phase=3 conditions=4:[NodeCondition]
    addresses=5:[NodeAddress] daemonEndpoints=6:NodeDaemonEndpoints nodeInfo=7:NodeSystemInfo
    images=8:[ContainerImage] volumesInUse=9:[string] volumesAttached=10:[AttachedVolume]
    config=11:NodeConfigStatus runtimeHandlers=12:[NodeRuntimeHandler] features=13:NodeFeatures
    declaredFeatures=14:[string]
NodeSwapStatus: capacity=1:int!
NodeSystemInfo: machineID=1! systemUUID=2! bootID=3! kernelVersion=4! osImage=5!
    containerRuntimeVersion=6! kubeletVersion=7! kubeProxyVersion=8! operatingSystem=9!
    architecture=10! swap=11:NodeSwapStatus
ObjectFieldSelector: apiVersion=1 fieldPath=2!
ObjectReference: kind=1 namespace=2 name=3 uid=4 apiVersion=5 resourceVersion=6 fieldPath=7
PersistentVolumeClaimSpec: accessModes=1:[string] resources=2:VolumeResourceRequirements
    volumeName=3 selector=4:LabelSelector storageClassName=5! volumeMode=6!
    dataSource=7:TypedLocalObjectReference dataSourceRef=8:TypedObjectReference
    volumeAttributesClassName=9!
PersistentVolumeClaimTemplate: metadata=1:ObjectMeta spec=2:PersistentVolumeClaimSpec
PersistentVolumeClaimVolumeSource: claimName=1! readOnly=2:bool
PhotonPersistentDiskVolumeSource: pdID=1! fsType=2
Pod: metadata=1:ObjectMeta spec=2:PodSpec status=3:PodStatus
PodAffinity: requiredDuringSchedulingIgnoredDuringExecution=1:[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution=2:[WeightedPodAffinityTerm]
PodAffinityTerm: labelSelector=1:LabelSelector namespaces=2:[string] topologyKey=3!
    namespaceSelector=4:LabelSelector matchLabelKeys=5:[string] mismatchLabelKeys=6:[string]
PodAntiAffinity: requiredDuringSchedulingIgnoredDuringExecution=1:[PodAffinityTerm]
    preferredDuringSchedulingIgnoredDuringExecution=2:[WeightedPodAffinityTerm]
PodCertificateProjection: signerName=1 keyType=2 maxExpirationSeconds=3:int!
    credentialBundlePath=4 keyPath=5 certificateChainPath=6 userAnnotations=7:{string}
    user=8:int!
PodCondition: type=1! status=2! lastProbeTime=3:Time lastTransitionTime=4:Time reason=5
    message=6 observedGeneration=7:int
PodDNSConfig: nameservers=1:[string] searches=2:[string] options=3:[PodDNSConfigOption]
PodDNSConfigOption: name=1 value=2!
PodExtendedResourceClaimStatus: requestMappings=1:[ContainerExtendedResourceRequest]
    resourceClaimName=2!
PodIP: ip=1!
PodOS: name=1!
PodReadinessGate: conditionType=1!
PodResourceClaim: name=1! resourceClaimName=3! resourceClaimTemplateName=4!
PodResourceClaimStatus: name=1! resourceClaimName=2!
PodSchedulingGate: name=1!
PodSchedulingGroup: podGroupName=1!
PodSecurityContext: seLinuxOptions=1:SELinuxOptions runAsUser=2:int! runAsNonRoot=3:bool!
    supplementalGroups=4:[int] fsGroup=5:int! runAsGroup=6:int! sysctls=7:[Sysctl]
    windowsOptions=8:WindowsSecurityContextOptions fsGroupChangePolicy=9!
    seccompProfile=10:SeccompProfile appArmorProfile=11:AppArmorProfile
    supplementalGroupsPolicy=12! seLinuxChangePolicy=13!
PodSpec: volumes=1:[Volume] containers=2:[Container] restartPolicy=3
    terminationGracePeriodSeconds=4:int! activeDeadlineSeconds=5:int! dnsPolicy=6
    nodeSelector=7:{string} serviceAccountName=8 serviceAccount=9 nodeName=10
    hostNetwork=11:bool hostPID=12:bool hostIPC=13:bool securityContext=14:PodSecurityContext
    imagePullSecrets=15:[LocalObjectReference] hostname=16 subdomain=17 affinity=18:Affinity
    schedulerName=19 initContainers=20:[Container] automountServiceAccountToken=21:bool!
    tolerations=22:[Toleration] hostAliases=23:[HostAlias] priorityClassName=24 priority=25:int!
    dnsConfig=26:PodDNSConfig shareProcessNamespace=27:bool!
    readinessGates=28:[PodReadinessGate] runtimeClassName=29! enableServiceLinks=30:bool!
    preemptionPolicy=31! overhead=32:{Quantity}
    topologySpreadConstraints=33:[TopologySpreadConstraint]
    ephemeralContainers=34:[EphemeralContainer] setHostnameAsFQDN=35:bool! os=36:PodOS
    hostUsers=37:bool! schedulingGates=38:[PodSchedulingGate]
    resourceClaims=39:[PodResourceClaim] resources=40:ResourceRequirements hostnameOverride=41!
    schedulingGroup=43:PodSchedulingGroup evictionResponders=44:[EvictionResponder]
PodStatus: phase=1 conditions=2:[PodCondition] message=3 reason=4 hostIP=5 podIP=6
    startTime=7:Time containerStatuses=8:[ContainerStatus] qosClass=9
    initContainerStatuses=10:[ContainerStatus] nominatedNodeName=11 podIPs=12:[PodIP]
    ephemeralContainerStatuses=13:[ContainerStatus] resize=14
    resourceClaimStatuses=15:[PodResourceClaimStatus] hostIPs=16:[HostIP]
    observedGeneration=17:int extendedResourceClaimStatus=18:PodExtendedResourceClaimStatus
    allocatedResources=19:{Quantity} resources=20:ResourceRequirements
    nodeAllocatableResourceClaimStatuses=21:[NodeAllocatableResourceClaimStatus]
    volumeHealth=22:[PodVolumeHealth]
PodVolumeHealth: name=1! healthConditions=2:[VolumeHealthCondition] lastTransitionTime=3:Time
PortStatus: port=1:int! protocol=2! error=3!
PortworxVolumeSource: volumeID=1! fsType=2 readOnly=3:bool
PreferredSchedulingTerm: weight=1:int! preference=2:NodeSelectorTerm
Probe: *=1:ProbeHandler initialDelaySeconds=2:int timeoutSeconds=3:int periodSeconds=4:int
    successThreshold=5:int failureThreshold=6:int terminationGracePeriodSeconds=7:int!
ProbeHandler: exec=1:ExecAction httpGet=2:HTTPGetAction tcpSocket=3:TCPSocketAction
    grpc=4:GRPCAction
ProjectedVolumeSource: sources=1:[VolumeProjection] defaultMode=2:int! defaultUser=3:int!
QuobyteVolumeSource: registry=1! volume=2! readOnly=3:bool user=4 group=5 tenant=6
RBDVolumeSource: monitors=1:[string] image=2! fsType=3 pool=4 user=5 keyring=6
    secretRef=7:LocalObjectReference readOnly=8:bool
ResourceClaim: name=1! request=2
ResourceFieldSelector: containerName=1 resource=2! divisor=3:Quantity
ResourceHealth: resourceID=1! health=2 message=6!
ResourceQuota: metadata=1:ObjectMeta spec=2:ResourceQuotaSpec status=3:ResourceQuotaStatus
ResourceQuotaSpec: hard=1:{Quantity} scopes=2:[string] scopeSelector=3:ScopeSelector
ResourceQuotaStatus: hard=1:{Quantity} used=2:{Quantity}
ResourceRequirements: limits=1:{Quantity} requests=2:{Quantity} claims=3:[ResourceClaim]
ResourceStatus: name=1! resources=2:[ResourceHealth]
SELinuxOptions: user=1 role=2 type=3 level=4
ScaleIOVolumeSource: gateway=1! system=2! secretRef=3:LocalObjectReference sslEnabled=4:bool
    protectionDomain=5 storagePool=6 storageMode=7 volumeName=8 fsType=9 readOnly=10:bool
ScopeSelector: matchExpressions=1:[ScopedResourceSelectorRequirement]
ScopedResourceSelectorRequirement: scopeName=1! operator=2! values=3:[string]
SeccompProfile: type=1! localhostProfile=2!
Secret: metadata=1:ObjectMeta data=2:{bytes} type=3 stringData=4:{string} immutable=5:bool!
SecretEnvSource: *=1:LocalObjectReference optional=2:bool!
SecretKeySelector: *=1:LocalObjectReference key=2! optional=3:bool!
SecretProjection: *=1:LocalObjectReference items=2:[KeyToPath] optional=4:bool!
SecretVolumeSource: secretName=1 items=2:[KeyToPath] defaultMode=3:int! optional=4:bool!
    defaultUser=5:int!
SecurityContext: capabilities=1:Capabilities privileged=2:bool! seLinuxOptions=3:SELinuxOptions
    runAsUser=4:int! runAsNonRoot=5:bool! readOnlyRootFilesystem=6:bool!
    allowPrivilegeEscalation=7:bool! runAsGroup=8:int! procMount=9!
    windowsOptions=10:WindowsSecurityContextOptions seccompProfile=11:SeccompProfile
    appArmorProfile=12:AppArmorProfile
Service: metadata=1:ObjectMeta spec=2:ServiceSpec status=3:ServiceStatus
ServiceAccount: metadata=1:ObjectMeta secrets=2:[ObjectReference]
    imagePullSecrets=3:[LocalObjectReference] automountServiceAccountToken=4:bool!
ServiceAccountTokenProjection: audience=1 expirationSeconds=2:int! path=3! user=4:int!
ServicePort: name=1 protocol=2 port=3:int! targetPort=4:IntOrString nodePort=5:int
    appProtocol=6!
ServiceSpec: ports=1:[ServicePort] selector=2:{string} clusterIP=3 type=4 externalIPs=5:[string]
    sessionAffinity=7 loadBalancerIP=8 loadBalancerSourceRanges=9:[string] externalName=10
    externalTrafficPolicy=11 healthCheckNodePort=12:int publishNotReadyAddresses=13:bool
    sessionAffinityConfig=14:SessionAffinityConfig ipFamilyPolicy=17! clusterIPs=18:[string]
    ipFamilies=19:[string] allocateLoadBalancerNodePorts=20:bool! loadBalancerClass=21!
    internalTrafficPolicy=22! trafficDistribution=23!
ServiceStatus: loadBalancer=1:LoadBalancerStatus conditions=2:[Condition]
SessionAffinityConfig: clientIP=1:ClientIPConfig
SleepAction: seconds=1:int!
StorageOSVolumeSource: volumeName=1 volumeNamespace=2 fsType=3 readOnly=4:bool
    secretRef=5:LocalObjectReference
Sysctl: name=1! value=2!
TCPSocketAction: port=1:IntOrString! host=2
Taint: key=1! value=2 effect=3! timeAdded=4:Time
Toleration: key=1 operator=2 value=3 effect=4 tolerationSeconds=5:int!
TopologySpreadConstraint: maxSkew=1:int! topologyKey=2! whenUnsatisfiable=3!
    labelSelector=4:LabelSelector minDomains=5:int! nodeAffinityPolicy=6! nodeTaintsPolicy=7!
    matchLabelKeys=8:[string]
TypedLocalObjectReference: apiGroup=1! kind=2! name=3!
TypedObjectReference: apiGroup=1! kind=2! name=3! namespace=4!
Volume: name=1! *=2:VolumeSource
VolumeDevice: name=1! devicePath=2!
VolumeHealthCondition: status=1! reason=2! message=3
VolumeMount: name=1! readOnly=2:bool mountPath=3! subPath=4 mountPropagation=5! subPathExpr=6
    recursiveReadOnly=7! bindMountOptions=8:[string]
VolumeMountStatus: name=1! mountPath=2! readOnly=3:bool recursiveReadOnly=4!
    volumeStatus=5:VolumeStatus
VolumeProjection: secret=1:SecretProjection downwardAPI=2:DownwardAPIProjection
    configMap=3:ConfigMapProjection serviceAccountToken=4:ServiceAccountTokenProjection
    clusterTrustBundle=5:ClusterTrustBundleProjection podCertificate=6:PodCertificateProjection
VolumeResourceRequirements: limits=1:{Quantity} requests=2:{Quantity}
VolumeSource: hostPath=1:HostPathVolumeSource emptyDir=2:EmptyDirVolumeSource
    gcePersistentDisk=3:GCEPersistentDiskVolumeSource
    awsElasticBlockStore=4:AWSElasticBlockStoreVolumeSource gitRepo=5:GitRepoVolumeSource
    secret=6:SecretVolumeSource nfs=7:NFSVolumeSource iscsi=8:ISCSIVolumeSource
    glusterfs=9:GlusterfsVolumeSource persistentVolumeClaim=10:PersistentVolumeClaimVolumeSource
    rbd=11:RBDVolumeSource flexVolume=12:FlexVolumeSource cinder=13:CinderVolumeSource
    cephfs=14:CephFSVolumeSource flocker=15:FlockerVolumeSource
    downwardAPI=16:DownwardAPIVolumeSource fc=17:FCVolumeSource
    azureFile=18:AzureFileVolumeSource configMap=19:ConfigMapVolumeSource
    vsphereVolume=20:VsphereVirtualDiskVolumeSource quobyte=21:QuobyteVolumeSource
    azureDisk=22:AzureDiskVolumeSource photonPersistentDisk=23:PhotonPersistentDiskVolumeSource
    portworxVolume=24:PortworxVolumeSource scaleIO=25:ScaleIOVolumeSource
    projected=26:ProjectedVolumeSource storageos=27:StorageOSVolumeSource csi=28:CSIVolumeSource
    ephemeral=29:EphemeralVolumeSource image=30:ImageVolumeSource
VolumeStatus: image=1:ImageVolumeStatus
VsphereVirtualDiskVolumeSource: volumePath=1! fsType=2 storagePolicyName=3 storagePolicyID=4
WeightedPodAffinityTerm: weight=1:int! podAffinityTerm=2:PodAffinityTerm
WindowsSecurityContextOptions: gmsaCredentialSpecName=1! gmsaCredentialSpec=2! runAsUserName=3!
    hostProcess=4:bool!

# networking.k8s.io/v1
IPBlock: cidr=1! except=2:[string]
NetworkPolicy: metadata=1:ObjectMeta spec=2:NetworkPolicySpec
NetworkPolicyEgressRule: ports=1:[NetworkPolicyPort] to=2:[NetworkPolicyPeer]
NetworkPolicyIngressRule: ports=1:[NetworkPolicyPort] from=2:[NetworkPolicyPeer]
NetworkPolicyPeer: podSelector=1:LabelSelector namespaceSelector=2:LabelSelector
    ipBlock=3:IPBlock
NetworkPolicyPort: protocol=1! port=2:IntOrString! endPort=3:int!
NetworkPolicySpec: podSelector=1:LabelSelector ingress=2:[NetworkPolicyIngressRule]
    egress=3:[NetworkPolicyEgressRule] policyTypes=4:[string]

# batch/v1 (CronJob and its JobTemplateSpec are not served; JobSpec.scheduling, alpha, is not
# described: a body using it is refused)
Job: metadata=1:ObjectMeta spec=2:JobSpec status=3:JobStatus
JobCondition: type=1! status=2! lastProbeTime=3:Time lastTransitionTime=4:Time reason=5
    message=6
JobSpec: parallelism=1:int! completions=2:int! activeDeadlineSeconds=3:int!
    selector=4:LabelSelector manualSelector=5:bool! template=6:PodTemplateSpec
    backoffLimit=7:int! ttlSecondsAfterFinished=8:int! completionMode=9! suspend=10:bool!
    podFailurePolicy=11:PodFailurePolicy backoffLimitPerIndex=12:int! maxFailedIndexes=13:int!
    podReplacementPolicy=14! managedBy=15! successPolicy=16:SuccessPolicy
JobStatus: conditions=1:[JobCondition] startTime=2:Time completionTime=3:Time active=4:int
    succeeded=5:int failed=6:int completedIndexes=7
    uncountedTerminatedPods=8:UncountedTerminatedPods ready=9:int! failedIndexes=10!
    terminating=11:int!
PodFailurePolicy: rules=1:[PodFailurePolicyRule]
PodFailurePolicyOnExitCodesRequirement: containerName=1! operator=2! values=3:[int]
PodFailurePolicyOnPodConditionsPattern: type=1! status=2!
PodFailurePolicyRule: action=1! onExitCodes=2:PodFailurePolicyOnExitCodesRequirement
    onPodConditions=3:[PodFailurePolicyOnPodConditionsPattern]
PodTemplateSpec: metadata=1:ObjectMeta spec=2:PodSpec
SuccessPolicy: rules=1:[SuccessPolicyRule]
SuccessPolicyRule: succeededIndexes=1! succeededCount=2:int!
UncountedTerminatedPods: succeeded=1:[string] failed=2:[string]

# rbac.authorization.k8s.io/v1
AggregationRule: clusterRoleSelectors=1:[LabelSelector]
ClusterRole: metadata=1:ObjectMeta rules=2:[PolicyRule] aggregationRule=3:AggregationRule
ClusterRoleBinding: metadata=1:ObjectMeta subjects=2:[Subject] roleRef=3:RoleRef
PolicyRule: verbs=1:[string] apiGroups=2:[string] resources=3:[string] resourceNames=4:[string]
    nonResourceURLs=5:[string]
Role: metadata=1:ObjectMeta rules=2:[PolicyRule]
RoleBinding: metadata=1:ObjectMeta subjects=2:[Subject] roleRef=3:RoleRef
RoleRef: apiGroup=1! kind=2! name=3!
Subject: kind=1! apiGroup=2 name=3! namespace=4

# authorization.k8s.io/v1 and authentication.k8s.io/v1: the self-reviews (the selectors of
# ResourceAttributes and UserInfo's extra are not described)
NonResourceAttributes: path=1 verb=2
NonResourceRule: verbs=1:[string] nonResourceURLs=2:[string]
ResourceAttributes: namespace=1 verb=2 group=3 version=4 resource=5 subresource=6 name=7
ResourceRule: verbs=1:[string] apiGroups=2:[string] resources=3:[string]
    resourceNames=4:[string]
SelfSubjectAccessReview: metadata=1:ObjectMeta spec=2:SelfSubjectAccessReviewSpec
    status=3:SubjectAccessReviewStatus
SelfSubjectAccessReviewSpec: resourceAttributes=1:ResourceAttributes
    nonResourceAttributes=2:NonResourceAttributes
SelfSubjectReview: metadata=1:ObjectMeta status=2:SelfSubjectReviewStatus
SelfSubjectReviewStatus: userInfo=1:UserInfo
SelfSubjectRulesReview: metadata=1:ObjectMeta spec=2:SelfSubjectRulesReviewSpec
    status=3:SubjectRulesReviewStatus
SelfSubjectRulesReviewSpec: namespace=1
SubjectAccessReviewStatus: allowed=1:bool! reason=2 evaluationError=3 denied=4:bool
SubjectRulesReviewStatus: resourceRules=1:[ResourceRule] nonResourceRules=2:[NonResourceRule]
    incomplete=3:bool! evaluationError=4
UserInfo: username=1 uid=2 groups=3:[string]
"""


@dataclass(frozen=True)
class Field:
    """One field of a message: its JSON name (``*`` inlines), type, shape and zero rule."""

    name: str
    type: str
    shape: str  # "one", "list" or "map"
    keep_zero: bool


Message = dict[int, Field]

_FIELD = re.compile(r"^([*\w]+)=(\d+)(?::(\[\w+\]|\{\w+\}|\w+))?(!?)$")


def _parse(text: str) -> dict[str, Message]:
    entries: list[str] = []
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith(" "):
            entries[-1] += " " + line.strip()
        else:
            entries.append(line)
    messages: dict[str, Message] = {}
    for entry in entries:
        name, _, rest = entry.partition(":")
        fields: Message = {}
        for token in rest.split():
            match = _FIELD.match(token)
            if match is None:
                raise ValueError(f"bad field {token!r} in {name}")
            fname, number, typ, keep = match.groups()
            typ = typ or "string"
            shape = {"[": "list", "{": "map"}.get(typ[0], "one")
            fields[int(number)] = Field(fname, typ.strip("[]{}"), shape, keep == "!")
        messages[name] = fields
    missing = {
        f.type
        for fields in messages.values()
        for f in fields.values()
        if f.type not in SCALARS and f.type not in messages
    }
    if missing:
        raise ValueError(f"messages used but not described: {sorted(missing)}")
    return messages


MESSAGES: dict[str, Message] = _parse(_SCHEMA)
