Bxj
locationdata.binp