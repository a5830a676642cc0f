// SPDX-License-Identifier: MIT
/*
 * Prints what include/uapi/linux/kvblk.h says about the structs and numbers
 * that tests/vm/kvblk_uapi.py describes, for uapi_python_check.py:
 *   struct NAME SIZE
 *   field NAME.FIELD OFFSET
 *   const NAME VALUE
 */
#include <stddef.h>
#include <stdio.h>

#include <linux/kvblk.h>

#define S(s)		printf("struct %s %zu\n", #s, sizeof(struct s))
#define F(s, f)		printf("field %s.%s %zu\n", #s, #f, offsetof(struct s, f))
#define C(c)		printf("const %s %llu\n", #c, (unsigned long long)(c))

int main(void)
{
	S(kvblk_attach);
	F(kvblk_attach, size); F(kvblk_attach, flags); F(kvblk_attach, bdev_fd);
	F(kvblk_attach, nsid); F(kvblk_attach, lba_size); F(kvblk_attach, max_cmd_bytes);
	F(kvblk_attach, capacity); F(kvblk_attach, start_lba); F(kvblk_attach, nr_hw_queues);
	F(kvblk_attach, engine); F(kvblk_attach, reserved); F(kvblk_attach, reserved2);
	F(kvblk_attach, buf_align); F(kvblk_attach, reserved3); F(kvblk_attach, target);
	F(kvblk_attach, reserved4); F(kvblk_attach, engines); F(kvblk_attach, reserved5);
	S(kvblk_buf_reg);
	F(kvblk_buf_reg, size); F(kvblk_buf_reg, flags); F(kvblk_buf_reg, kind);
	F(kvblk_buf_reg, dmabuf_fd); F(kvblk_buf_reg, addr); F(kvblk_buf_reg, len);
	F(kvblk_buf_reg, buf_id); F(kvblk_buf_reg, reserved); F(kvblk_buf_reg, reserved2);
	S(kvblk_buf_unreg);
	F(kvblk_buf_unreg, size); F(kvblk_buf_unreg, flags); F(kvblk_buf_unreg, buf_id);
	F(kvblk_buf_unreg, reserved);
	S(kvblk_io_desc);
	F(kvblk_io_desc, offset); F(kvblk_io_desc, length); F(kvblk_io_desc, buf_offset);
	F(kvblk_io_desc, buf_id); F(kvblk_io_desc, flags); F(kvblk_io_desc, tag);
	F(kvblk_io_desc, target); F(kvblk_io_desc, reserved);
	S(kvblk_desc_result);
	F(kvblk_desc_result, status); F(kvblk_desc_result, reserved);
	F(kvblk_desc_result, bytes);
	S(kvblk_load_many);
	F(kvblk_load_many, size); F(kvblk_load_many, flags); F(kvblk_load_many, nr_descs);
	F(kvblk_load_many, desc_bytes); F(kvblk_load_many, descs); F(kvblk_load_many, results);
	F(kvblk_load_many, result_bytes); F(kvblk_load_many, bad_index);
	F(kvblk_load_many, nr_ok); F(kvblk_load_many, engine); F(kvblk_load_many, nr_cmds);
	F(kvblk_load_many, elapsed_ns); F(kvblk_load_many, reserved);
	F(kvblk_load_many, engines); F(kvblk_load_many, nr_targets);
	C(KVBLK_IOC_MAGIC);
	C(KVBLK_IOC_GET_FEATURES);
	C(KVBLK_IOC_ATTACH);
	C(KVBLK_IOC_REGISTER_BUFFER);
	C(KVBLK_IOC_UNREGISTER_BUFFER);
	C(KVBLK_IOC_LOAD_MANY);
	C(KVBLK_ATTACH_F_ENGINE_BIO);
	C(KVBLK_ATTACH_F_ENGINE_PRP);
	C(KVBLK_ENGINE_PRP);
	C(KVBLK_ENGINE_BIO);
	C(KVBLK_ENGINE_FILE);
	C(KVBLK_ATTACH_SIZE_VER2);
	C(KVBLK_ATTACH_SIZE_VER3);
	C(KVBLK_LOAD_F_STORE);
	C(KVBLK_LOAD_F_DURABLE);
	C(KVBLK_FEAT_STORE);
	C(KVBLK_MEM_HOST);
	C(KVBLK_MEM_DMABUF);
	return 0;
}
