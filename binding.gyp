{
  "targets": [
    {
      "target_name": "kpng_native",
      "sources": [
        "native/addon.cc",
        "native/nft_apply.cc",
        "native/nft_list.cc",
        "native/conntrack.cc",
        "native/netlink_batch.cc",
        "native/ipvs.cc",
        "native/rtnl.cc",
        "native/ipset.cc",
        "native/sysctl.cc",
        "native/ebpf.cc",
        "native/peercred.cc",
        "native/malloc.cc"
      ],
      "include_dirs": ["<!(node -p \"require('node-addon-api').include_dir\")"],
      "defines": ["NAPI_VERSION=8", "NAPI_DISABLE_CPP_EXCEPTIONS", "_GNU_SOURCE"],
      "cflags_cc": ["-O2", "-Wall", "-Wno-missing-field-initializers", "<!@(pkg-config --cflags libnftnl libmnl libnetfilter_conntrack libbpf)"],
      "libraries": ["<!@(pkg-config --libs libnftnl libmnl libnetfilter_conntrack libbpf)"]
    }
  ]
}
