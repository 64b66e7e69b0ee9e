// Every variant the scorer and the tests can run: the submission's own (submission.h's
// variants(), the only ones uploaded) and the ones under dev/, compiled into the scorer and the
// tests so that `scorer run --variant OP=NAME` scores them, but never packaged.
//
// Each dev/<op>.cu lists its names and builds them (dev_<op>_variants, make_dev_<op>); this
// header's functions put them beside the submission's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "submission/submission.h"

namespace submission::dev {

// Every variant of op ("pooler", "dense", "router", "moe_w4a16"): the submission's first
// ("default" first), then dev's.
std::vector<std::string> variants(const std::string& op);
// Whether op's variant `name` is the submission's, so part of the upload.
bool in_upload(const std::string& op, const std::string& name);

// make_<op> for any name variants(op) lists: dev's own here, the rest by submission::make_<op>.
std::unique_ptr<Pooler> make_pooler(const PoolerDims&, const PoolerWeights&, const std::string& variant);
std::unique_ptr<Dense> make_dense(const DenseDims&, const DenseWeights&, const std::string& variant);
std::unique_ptr<Router> make_router(const RouterDims&, const RouterWeights&, const std::string& variant);
std::unique_ptr<Moe> make_moe(const MoeDims&, const MoeWeights&, const std::string& variant);

// Each op's dev variants (dev/<op>.cu), and the factory for one of those names.
std::vector<std::string> dev_pooler_variants();
std::vector<std::string> dev_dense_variants();
std::vector<std::string> dev_router_variants();
std::vector<std::string> dev_moe_variants();
std::unique_ptr<Pooler> make_dev_pooler(const PoolerDims&, const PoolerWeights&, const std::string& variant);
std::unique_ptr<Dense> make_dev_dense(const DenseDims&, const DenseWeights&, const std::string& variant);
std::unique_ptr<Router> make_dev_router(const RouterDims&, const RouterWeights&, const std::string& variant);
std::unique_ptr<Moe> make_dev_moe(const MoeDims&, const MoeWeights&, const std::string& variant);

}  // namespace submission::dev
