# The cluster's certificates (sourced by hack/cluster/up.sh): one CA, the API server's serving
# certificate, a client certificate per component and per node (the identities Node and RBAC
# authorization expect), and the service-account signing key. EC P-256 keys: instant to make.

# cert <dir> <name> <subject> [subjectAltName]: <name>.key and <name>.crt signed by the CA, a year.
pki_cert() {
	local dir="$1" name="$2" subj="$3" san="${4:-}" ext="$1/$2.ext"
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/$name.key" 2>/dev/null
	openssl req -new -key "$dir/$name.key" -subj "$subj" -out "$dir/$name.csr" 2>/dev/null
	{
		echo "basicConstraints=CA:FALSE"
		echo "keyUsage=critical,digitalSignature,keyEncipherment"
		if [[ -n $san ]]; then echo "extendedKeyUsage=serverAuth,clientAuth"; echo "subjectAltName=$san"; else echo "extendedKeyUsage=clientAuth"; fi
	} >"$ext"
	openssl x509 -req -in "$dir/$name.csr" -CA "$dir/ca.crt" -CAkey "$dir/ca.key" -CAcreateserial -days 365 \
		-extfile "$ext" -out "$dir/$name.crt" 2>/dev/null || die "pki: signing $name failed"
	rm -f "$dir/$name.csr" "$ext"
	chmod 600 "$dir/$name.key"
}

# pki_make <dir> <API server certificate's IPs> <api server DNS name> <node names...>
# The IPs, space-separated: the API server's own and the `kubernetes` Service's (plan.ts apiServerCertIPs).
pki_make() {
	local dir="$1" ips="$2" api_name="$3" n ip_sans=""; shift 3
	for n in $ips; do ip_sans+="IP:$n,"; done
	mkdir -p "$dir"; chmod 700 "$dir"
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/ca.key" 2>/dev/null
	openssl req -x509 -new -key "$dir/ca.key" -subj "/CN=kpng-cluster-ca" -days 365 -out "$dir/ca.crt" \
		-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature" 2>/dev/null ||
		die "pki: making the CA failed"
	pki_cert "$dir" apiserver "/CN=kube-apiserver" \
		"${ip_sans}IP:127.0.0.1,DNS:$api_name,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local,DNS:localhost"
	pki_cert "$dir" apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client"
	pki_cert "$dir" admin "/O=system:masters/CN=kubernetes-admin"
	pki_cert "$dir" controller-manager "/CN=system:kube-controller-manager"
	pki_cert "$dir" scheduler "/CN=system:kube-scheduler"
	for n in "$@"; do pki_cert "$dir" "$n" "/O=system:nodes/CN=system:node:$n"; done
	openssl ecparam -name prime256v1 -genkey -noout -out "$dir/sa.key" 2>/dev/null
	openssl ec -in "$dir/sa.key" -pubout -out "$dir/sa.pub" 2>/dev/null
	chmod 600 "$dir/ca.key" "$dir/sa.key"
}
