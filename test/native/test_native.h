// The test addon (kpng_test_native): native code only tests use, built beside the product addon by
// hack/build-native.sh and never packed. It shares the product's nf_tables dumps (native/nft_dump.h).
#pragma once
#include "nft_dump.h"

namespace kpng {

Napi::Value NftList(const Napi::CallbackInfo& info);
Napi::Object NftnlConstants(Napi::Env env);

}  // namespace kpng
