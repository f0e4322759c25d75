#include "store/block_layout.h"

#include <gtest/gtest.h>

#include <vector>

namespace dualpath::store {
namespace {

TEST(BlockLayout, SizesFollowThePaperForDs660b) {
  // PAPER.md §4: DS 660B FP8 MLA, 656 B per token per layer, 61 layers, 64 tokens.
  BlockLayout l{61, 64, 656};
  EXPECT_TRUE(l.validate().is_ok());
  EXPECT_EQ(l.layer_block_bytes(), 41984);
  EXPECT_EQ(l.full_block_bytes(), 41984 * 61);
}

TEST(BlockLayout, LayerBlocksAreViewsIntoTheFullBlockNotCopies) {
  BlockLayout l{3, 4, 8};
  std::vector<std::byte> full(static_cast<size_t>(l.full_block_bytes()));
  MutableFullBlock view(l, full);
  for (int64_t layer = 0; layer < 3; ++layer) {
    auto lb = view.layer(layer);
    EXPECT_EQ(lb.data(), full.data() + layer * 32);
    EXPECT_EQ(lb.size(), 32u);
  }
  view.token(2, 1)[0] = std::byte{42};
  EXPECT_EQ(full[2 * 32 + 1 * 8], std::byte{42});
}

TEST(BlockLayout, RejectsNonPositiveAndHugeLayoutsWithTheFieldValues) {
  Status s = BlockLayout{0, 64, 656}.validate();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("layers=0"), std::string::npos) << s.message();
  EXPECT_FALSE((BlockLayout{1000, 1 << 20, 1 << 20}.validate().is_ok()));
}

}  // namespace
}  // namespace dualpath::store
